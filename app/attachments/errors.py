"""What can go wrong with an attached file: one error class per problem, each with one
sentence that says what happened and what to do (shown on the file's chip, or as the CLI's
one line)."""

from __future__ import annotations


class AttachmentError(Exception):
    """A file Ember cannot attach; ``str(error)`` is the sentence to show."""


class UnsupportedFormatError(AttachmentError):
    def __init__(self, name: str, suffix: str) -> None:
        super().__init__(
            f"{name}: Ember does not read {suffix} files; attach text, Markdown, code, PDF, .docx "
            "or HTML (save it in one of these formats first)."
        )


class NotTextError(AttachmentError):
    def __init__(self, name: str, why: str = "binary data") -> None:
        super().__init__(
            f"{name} holds {why}, not text; attach a text file saved as UTF-8 "
            "(or a PDF, .docx or HTML file with its own name ending)."
        )


class TooLargeError(AttachmentError):
    def __init__(self, name: str, what: str, limit: str) -> None:
        super().__init__(
            f"{name} is too large ({what}; Ember reads up to {limit}); attach a shorter part of it."
        )


class EncryptedPdfError(AttachmentError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name} is protected by a password; save an unprotected copy (print it to PDF "
            "from a viewer that opens it) and attach that."
        )


class NoTextLayerError(AttachmentError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name} has no text layer (it looks like a scan or pictures of pages); run it "
            "through OCR (for example ocrmypdf) and attach the result."
        )


class CorruptFileError(AttachmentError):
    def __init__(self, name: str, kind: str) -> None:
        super().__init__(
            f"{name} could not be read as {kind} (the file is damaged or is not really "
            f"{kind}); open it in its own program, save it again and attach the copy."
        )


class UnreadableError(AttachmentError):
    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name} cannot be opened ({reason}); check the path and permissions.")


class AttachmentCancelledError(AttachmentError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Reading {name} was cancelled; attach it again to read it.")
