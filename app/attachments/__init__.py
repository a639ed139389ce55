"""Attached files: their text, their copy in EMBER_HOME, and what of them goes before a
question. No Qt here: the GUI runs these on a worker thread (with ``progress`` and ``cancel``)
and shows each :class:`~app.attachments.errors.AttachmentError` on the file's chip.

- ``attachment.attach_file(path)``: store, then read the stored copy (an ``Attachment``).
- ``extract.extract(path)``: a ``Document`` (sections with their page or heading).
- ``store.store(path)``: a ``StoredFile`` in ``attachments/<sha256[:2]>/<sha256><suffix>``.
- ``context.build_context(documents, question, room, count_tokens, conversation_id)``:
  the text to put before the question and its sources (whole files, or retrieved chunks).
- ``index.drop_index(conversation_id)``, ``store.remove_stored(sha256, suffix)``: when a
  conversation is deleted.
"""
