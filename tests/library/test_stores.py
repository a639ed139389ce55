"""Other apps' stores listed in place: Ollama's manifests and blobs, llama.cpp's cache, Jan's
and GPT4All's folders; where each is on each OS; their switches; the same file once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.config import Settings
from app.library.local import Library
from app.library.projectors import projector_beside
from app.library.stores import known_stores
from app.server.catalog import LibraryCatalog
from tests.helpers.gguf_writer import gguf_bytes, write_gguf
from tests.helpers.other_stores import ollama_blob, ollama_model


def _library(tmp_path: Path, **kw: object) -> Library:
    return Library(
        tmp_path / "models",
        hf_cache_dir=tmp_path / "hf",
        lmstudio_dirs=(),
        cache_path=tmp_path / "library.json",
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def ollama(ember_home: Path) -> Path:
    """The store OLLAMA_MODELS names (tests/conftest.py points it into EMBER_HOME)."""
    store = Path(os.environ["OLLAMA_MODELS"])
    store.mkdir(parents=True)
    return store


def test_ollama_models_are_named_from_their_manifests(tmp_path: Path, ollama: Path) -> None:
    ollama_model(
        ollama,
        "gemma3:270m",
        gguf_bytes(name="Gemma", quant="Q4_K_M", chat_template="{{ gguf's own }}"),
        projector=gguf_bytes(arch="clip", name="Projector"),
        template="{{ .Prompt }}",
        params={"stop": ["<end_of_turn>"], "temperature": 1},
        system="Be brief.",
    )
    ollama_model(ollama, "alice/tiny:latest", gguf_bytes(name="Tiny"))
    ollama_model(ollama, "hf.co/bob/Small-GGUF:Q8_0", gguf_bytes(name="Small", quant="Q8_0"))
    ollama_model(ollama, "nomic/embed-adapter:v1", None)  # replaced below by a non-GGUF
    adapter = ollama / "manifests/registry.ollama.ai/nomic/embed-adapter/v1"
    adapter.write_text('{"layers": [{"mediaType": "application/vnd.ollama.image.adapter", '
                       f'"digest": "{ollama_blob(ollama, b"lora")}"}}]}}')  # fmt: skip

    models = {m.name: m for m in _library(tmp_path).scan()}
    assert set(models) == {"gemma3:270m", "alice/tiny:latest", "hf.co/bob/Small-GGUF:Q8_0"}
    gemma = models["gemma3:270m"]
    assert gemma.source == "ollama" and not gemma.owned and gemma.id == "gemma3:270m"
    assert gemma.path.parent == ollama / "blobs" and gemma.path.name.startswith("sha256-")
    assert gemma.mmproj is not None and gemma.mmproj.parent == ollama / "blobs"
    assert projector_beside(gemma.path) == gemma.mmproj  # `ember run`, the app: as a vision model
    assert projector_beside(models["alice/tiny:latest"].path) is None
    details = dict(gemma.app_details)
    assert details["Ollama's template"] == "{{ .Prompt }}"
    assert 'stop ["<end_of_turn>"]' in details["Ollama's parameters"]
    assert details["Ollama's system prompt"] == "Be brief."
    # Ollama's template is shown, never used: the model runs with the GGUF's own
    assert gemma.info is not None and gemma.info.chat_template == "{{ gguf's own }}"
    assert gemma.quant == "Q4_K_M"
    assert models["hf.co/bob/Small-GGUF:Q8_0"].quant == "Q8_0"
    assert _library(tmp_path).find("gemma3:270m").path == gemma.path
    assert _library(tmp_path).find("alice/tiny:latest").name == "alice/tiny:latest"


def test_jan_gpt4all_and_llama_cpp_folders(tmp_path: Path, ember_home: Path) -> None:
    data = Path(os.environ["XDG_DATA_HOME"])
    jan = data / "Jan" / "data"
    write_gguf(jan / "llamacpp/models/qwen3-4b-instruct/model.gguf", name="Qwen")
    write_gguf(jan / "models/old-llama/llama-Q5_K_M.gguf", name="Old", quant="Q5_K_M")
    write_gguf(data / "nomic.ai/GPT4All/Meta-Llama-3-8B-Instruct.Q4_0.gguf", name="G", quant="Q4_0")
    (data / "nomic.ai/GPT4All/localdocs_v2.db").write_bytes(b"not a model")
    cache = Path(os.environ["LLAMA_CACHE"])
    write_gguf(cache / "ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M.gguf", name="L")
    (cache / "ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M.gguf.json").write_text("{}")
    snapshot = cache / "models--unsloth--Phi-GGUF/snapshots/abc"
    write_gguf(snapshot / "phi-Q8_0.gguf", name="Phi", quant="Q8_0")

    by_source: dict[str, set[str]] = {}
    for m in _library(tmp_path).scan():
        by_source.setdefault(m.source, set()).add(m.name)
        assert not m.owned
    assert by_source == {
        "jan": {"qwen3-4b-instruct", "llama-Q5_K_M"},
        "gpt4all": {"Meta-Llama-3-8B-Instruct.Q4_0"},
        "llama.cpp": {"ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M", "phi-Q8_0"},
    }


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        (
            "linux",
            {},
            {
                "ollama": ["H/.ollama/models", "/usr/share/ollama/.ollama/models"],
                "llama.cpp": ["H/.cache/llama.cpp"],
                "jan": ["H/.local/share/Jan/data", "H/jan"],
                "gpt4all": ["H/.local/share/nomic.ai/GPT4All"],
            },
        ),
        (
            "linux",
            {"OLLAMA_MODELS": "/o", "LLAMA_CACHE": "/l", "XDG_DATA_HOME": "/x"},
            {
                "ollama": ["/o"],
                "llama.cpp": ["/l"],
                "jan": ["/x/Jan/data", "H/jan"],
                "gpt4all": ["/x/nomic.ai/GPT4All"],
            },
        ),
        (
            "darwin",
            {},
            {
                "ollama": ["H/.ollama/models"],
                "llama.cpp": ["H/Library/Caches/llama.cpp"],
                "jan": ["H/Library/Application Support/Jan/data", "H/jan"],
                "gpt4all": ["H/Library/Application Support/nomic.ai/GPT4All"],
            },
        ),
        (
            "win32",
            {"LOCALAPPDATA": "/L", "APPDATA": "/R"},
            {
                "ollama": ["H/.ollama/models"],
                "llama.cpp": ["/L/llama.cpp"],
                "jan": ["/R/Jan/data", "H/jan"],
                "gpt4all": ["/L/nomic.ai/GPT4All"],
            },
        ),
    ],
)
def test_where_each_store_is_on_each_os(
    platform: str, env: dict[str, str], expected: dict[str, list[str]]
) -> None:
    stores = known_stores(env, Path("H"), platform)
    assert {s.key: [p.as_posix() for p in s.roots] for s in stores} == expected


def test_switches_default_to_found_and_are_kept(tmp_path: Path, ollama: Path) -> None:
    ollama_model(ollama, "gemma3:270m")
    write_gguf(Path(os.environ["XDG_DATA_HOME"]) / "nomic.ai/GPT4All/x.gguf", name="X")
    library = _library(tmp_path)
    assert {m.source for m in library.scan()} == {"ollama", "gpt4all"}  # found: on
    Settings().set("library.sources", {"ollama": False})
    assert {m.source for m in library.scan()} == {"gpt4all"}  # switched off: not read
    Settings().set("library.sources", {"ollama": True, "gpt4all": False})
    assert {m.source for m in library.scan()} == {"ollama"}
    Settings().set("library.sources", {"ollama": "yes please"})  # not a bool: the default
    assert {m.source for m in library.scan()} == {"ollama", "gpt4all"}


def test_an_ollama_blob_equal_to_a_hub_download_is_one_entry(tmp_path: Path, ollama: Path) -> None:
    data = gguf_bytes(name="Shared", payload=50_000)
    hub = write_gguf(
        tmp_path / "hf/models--bob--Shared-GGUF/blobs/x", name="Shared", payload=50_000
    )
    link = tmp_path / "hf/models--bob--Shared-GGUF/snapshots/c1/shared-Q4_K_M.gguf"
    link.parent.mkdir(parents=True)
    link.symlink_to(hub)
    ollama_model(ollama, "shared:latest", data)  # a copy: another inode, the same bytes
    ollama_model(ollama, "other:latest", gguf_bytes(name="Sharee", payload=50_000))  # same size
    library = _library(tmp_path)
    models = library.scan()
    assert len(models) == 2
    shared = next(m for m in models if m.source == "hf-cache")
    assert shared.locations[0] == link and shared.locations[1].parent == ollama / "blobs"
    assert library.find(str(shared.locations[1])) == shared  # either path names it
    # a request naming one place loads the file from there
    catalog = LibraryCatalog(library)
    resolved = catalog.resolve(str(shared.locations[1]))
    assert resolved is not None and resolved.path == str(shared.locations[1])
    by_id = catalog.resolve(shared.id)
    assert by_id is not None and by_id.path == str(link)
    assert shared.aliases == ("shared:latest",)  # Ollama's name still names the one entry
    assert library.find("shared:latest") == shared
    by_ollama_name = catalog.resolve("shared:latest")
    assert by_ollama_name is not None and by_ollama_name.path == str(shared.locations[1])

    assert library.delete(shared.id) == "hidden"  # every location is hidden, none deleted
    assert [m.name for m in library.scan()] == ["other:latest"]
    assert link.exists() and shared.locations[1].exists()
    assert library.unhide(hub) and library.unhide(shared.locations[1])
    assert len(library.scan()) == 2


def test_a_damaged_hidden_list_hides_nothing(tmp_path: Path, ollama: Path) -> None:
    ollama_model(ollama, "tiny:latest")
    hidden = tmp_path / "hidden.json"
    library = _library(tmp_path, hidden_path=hidden)
    for text in ("{", "[" * 100_000, '{"paths": "all"}', '{"paths": [1, null]}', " " * (5 << 20)):
        hidden.write_text(text)
        assert [m.name for m in library.scan()] == ["tiny:latest"]
    assert library.delete("tiny:latest") == "hidden"  # and a delete writes a good one
    assert library.scan() == [] and not library.unhide("/no/such\0file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_gguf_in_a_folder_store_never_blocks_the_scan(tmp_path: Path) -> None:
    gpt4all = Path(os.environ["XDG_DATA_HOME"]) / "nomic.ai" / "GPT4All"
    jan = Path(os.environ["XDG_DATA_HOME"]) / "Jan" / "data" / "llamacpp" / "models" / "x"
    for folder in (gpt4all, jan):
        folder.mkdir(parents=True)
        os.mkfifo(folder / "model.gguf")
    (gpt4all / "folder.gguf").mkdir()
    write_gguf(gpt4all / "real.gguf", name="Real")
    assert [m.name for m in _library(tmp_path).scan()] == ["real"]
