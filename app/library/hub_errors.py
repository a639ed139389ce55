"""What can go wrong talking to the Hugging Face Hub, in words that say what to do.

:func:`hub_errors` turns huggingface_hub's and httpx2's exceptions into :class:`HubError`
subclasses; the message helpers are shared with the downloads, which make their own requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from huggingface_hub import errors as hf_errors


class HubError(Exception):
    """Something went wrong talking to the Hub; ``str(error)`` is a message for the user."""


class HubUnreachableError(HubError):
    """No answer: offline, DNS, connection refused, timeout, HF_HUB_OFFLINE."""


class RepoNotFoundError(HubError):
    """The repository does not exist (or is private and the token cannot see it)."""


class RevisionNotFoundError(HubError):
    """The branch, tag or commit does not exist in the repository."""


class RemoteFileNotFoundError(HubError):
    """The repository has no file by that name."""


class HubAuthError(HubError):
    """401/403: the token is missing, invalid or lacks access."""


class GatedRepoError(HubAuthError):
    """The repository is gated: its terms must be accepted on the Hub, and HF_TOKEN set."""


class HubResponseError(HubError):
    """The Hub answered with an error status (5xx, 429, ...) or something unexpected."""


class HeaderTooLargeError(HubError):
    """A remote GGUF header did not end within the fetch limit."""


class UnsafeNameError(ValueError):
    """A repository id or file name that could escape a directory (``..``, absolute, ...)."""


def gated_message(repo_id: str, endpoint: str, token_sent: bool, status: int | None = None) -> str:
    url = f"{endpoint}/{repo_id}"
    if not token_sent:
        return (
            f"This repository is gated: {repo_id} needs you to accept its terms. Accept them on "
            f"the Hub ({url}), then set HF_TOKEN to an access token of that account (or run "
            "`hf auth login`) and try again."
        )
    return (
        f"This repository is gated and your Hugging Face token has no access to {repo_id}"
        f"{f' ({status})' if status else ''}. Accept its terms on the Hub ({url}) with the "
        "account the token belongs to, or set HF_TOKEN to a token of an account that has."
    )


def transport_reason(error: BaseException) -> str:
    """Why a connection failed, in words (not ``[Errno -2] Name or service not known``): the
    first cause in the exception's chain that says more than the HTTP client's wrapper."""
    import socket
    import ssl

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, socket.gaierror):
            return "its name could not be looked up (no network, or no DNS)"
        if isinstance(seen, ConnectionRefusedError):
            return "the connection was refused (nothing answers at that address)"
        if isinstance(seen, ssl.SSLError):
            return f"the secure connection failed ({seen.reason or seen})"
        if isinstance(seen, TimeoutError):
            return "it did not answer in time"
        seen = seen.__cause__ or seen.__context__
    text = str(error)
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "its name could not be looked up (no network, or no DNS)"
    if "Connection refused" in text:
        return "the connection was refused (nothing answers at that address)"
    return text or type(error).__name__


def unreachable_message(endpoint: str, reason: object) -> str:
    return (
        f"Can't reach the Hugging Face Hub at {endpoint}: {reason}. Check your internet "
        "connection (or HF_ENDPOINT, if you use a mirror) and try again."
    )


def _token_sent(exc: hf_errors.HfHubHTTPError) -> bool:
    try:
        return "authorization" in exc.response.request.headers
    except (AttributeError, RuntimeError):  # no request recorded
        return False


@contextmanager
def hub_errors(endpoint: str, repo_id: str, filename: str | None = None) -> Iterator[None]:
    """Translate huggingface_hub / httpx2 errors into :class:`HubError` with useful messages."""
    import httpx2
    from huggingface_hub import errors as hf_errors

    what = f"{filename} in {repo_id}" if filename else repo_id
    try:
        yield
    except HubError:
        raise
    except hf_errors.GatedRepoError as e:
        status = e.response.status_code if e.response is not None else None
        raise GatedRepoError(gated_message(repo_id, endpoint, _token_sent(e), status)) from e
    except hf_errors.RepositoryNotFoundError as e:
        hint = (
            "" if _token_sent(e) else " If it is private, set HF_TOKEN to a token that can see it."
        )
        raise RepoNotFoundError(
            f"There is no repository {repo_id} on the Hub ({endpoint}). Check the name.{hint}"
        ) from e
    except hf_errors.RevisionNotFoundError as e:
        raise RevisionNotFoundError(f"{repo_id} has no branch, tag or commit by that name.") from e
    except hf_errors.RemoteEntryNotFoundError as e:
        raise RemoteFileNotFoundError(
            f"{repo_id} has no file {filename or ''}".rstrip() + "."
        ) from e
    except hf_errors.OfflineModeIsEnabled as e:
        raise HubUnreachableError(
            "Hub access is switched off (HF_HUB_OFFLINE is set); unset it to search and download."
        ) from e
    except hf_errors.HfHubHTTPError as e:
        raise _status_error(e.response.status_code, endpoint, repo_id, what, _token_sent(e)) from e
    except httpx2.TimeoutException as e:
        raise HubUnreachableError(unreachable_message(endpoint, "it did not answer in time")) from e
    except httpx2.TransportError as e:
        raise HubUnreachableError(unreachable_message(endpoint, transport_reason(e))) from e
    except hf_errors.HFValidationError as e:
        raise UnsafeNameError(str(e)) from e


def _status_error(
    status: int, endpoint: str, repo_id: str, what: str, token_sent: bool
) -> HubError:
    if status == 401:
        if token_sent:
            return HubAuthError(
                "The Hub rejected your Hugging Face token (401). Check HF_TOKEN (or log in again "
                "with `hf auth login`)."
            )
        return HubAuthError(
            f"{repo_id} needs a Hugging Face token (401): set HF_TOKEN to an access token and "
            "try again."
        )
    if status == 403:
        return HubAuthError(
            f"Your Hugging Face token is not allowed to read {repo_id} (403). Use a token with "
            "read access to it (HF_TOKEN)."
        )
    if status == 429:
        return HubResponseError(
            "The Hub is rate-limiting requests (429); wait a minute and try again."
        )
    if status >= 500:
        return HubResponseError(
            f"The Hub at {endpoint} had a problem ({status}) while reading {what}; try again later."
        )
    return HubResponseError(f"The Hub answered {status} for {what}.")
