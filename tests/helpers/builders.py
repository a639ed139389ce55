"""Real files for the attachment tests, built here: PDFs with fpdf2 (and encrypted by pypdf),
.docx with python-docx, HTML and text by hand."""

from __future__ import annotations

import io
import random
from pathlib import Path

FACT = "The lighthouse keeper's cat on Ardmore Point is named Bartholomew Quince."
QUESTION = "What is the name of the lighthouse keeper's cat on Ardmore Point?"
FACT_PAGE = 27

_VOCABULARY = (
    "river market council harvest railway ledger spring orchard weaver bridge granary quarry "
    "mill tariff parish meadow canal foundry tenant charter barley wool copper kiln ferry "
    "almanac survey boundary festival cooper tannery vineyard saddle pasture timber loom "
    "merchant furnace chapel thatch cider rope anvil barge hedge lantern orchard clerk"
)
_WORDS = _VOCABULARY.split()


def filler(rng: random.Random, sentences: int) -> str:
    """Plausible-looking sentences with none of the fact's words."""
    out = []
    for _ in range(sentences):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 14))]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def long_pdf(path: Path, pages: int = 40, fact_page: int = FACT_PAGE) -> Path:
    """``pages`` pages of filler; the fact in the middle of page ``fact_page``."""
    from fpdf import FPDF

    rng = random.Random(7)
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(0, 6, filler(rng, 6), new_x="LMARGIN", new_y="NEXT")
        if number == fact_page:
            pdf.multi_cell(0, 6, FACT, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 6, filler(rng, 6), new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def short_pdf(path: Path, text: str = "Ember reads short PDFs whole.") -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.multi_cell(
        0, 6, "The second page says the tide turns at noon.", new_x="LMARGIN", new_y="NEXT"
    )
    pdf.output(str(path))
    return path


def encrypted_pdf(path: Path, source: Path, user_password: str = "secret") -> Path:
    """``source`` encrypted; with an empty ``user_password`` only editing is restricted (any
    viewer opens it), as bank statements and forms often are."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-128")
    with path.open("wb") as f:
        writer.write(f)
    return path


def image_only_pdf(path: Path, pages: int = 3) -> Path:
    """A 'scan': each page one picture, no text layer."""
    from fpdf import FPDF
    from PIL import Image

    pdf = FPDF()
    for number in range(pages):
        picture = Image.new("RGB", (200, 260), (255 - number * 40, 240, 230))
        pdf.add_page()
        pdf.image(picture, x=10, y=10, w=180)
    pdf.output(str(path))
    return path


def docx_with_headings(path: Path) -> Path:
    from docx import Document

    doc = Document()
    doc.add_heading("Ember field notes", level=0)
    doc.add_paragraph("Notes gathered over one season.")
    doc.add_heading("Tides", level=1)
    doc.add_paragraph("The tide turns at noon in the harbour.")
    doc.add_paragraph("Spring tides come twice a month.")
    doc.add_heading("Birds", level=2)
    doc.add_paragraph("Puffins nest on the northern cliffs.")
    table = doc.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "species"
    table.cell(0, 1).text = "count"
    table.cell(1, 0).text = "puffin"
    table.cell(1, 1).text = "212"
    doc.save(str(path))
    return path


def pdf_bytes_garbage() -> bytes:
    return b"%PDF-1.7\n" + bytes(random.Random(3).randrange(256) for _ in range(4000))


def png_bytes() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PNG")
    return buffer.getvalue()
