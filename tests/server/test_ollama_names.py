"""Ollama-style names (app/server/names.py): one per model, the same on every listing, matched
as Ollama matches them; aliases made by /api/copy. No model or server needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.server.catalog import CatalogModel, ChainCatalog, StaticCatalog
from app.server.names import AliasStore, assign, check_name, find, name_of, named_models


def entry(model_id: str, repo: str | None = None, quant: str | None = None) -> CatalogModel:
    name = Path(model_id).name.removesuffix(".gguf")
    return CatalogModel(id=model_id, path=f"/m/{model_id}", repo_id=repo, quant=quant, name=name)


def test_each_kind_of_model_gets_an_ollama_name() -> None:
    hub = entry("bartowski/Qwen-GGUF/Qwen-Q4_K_M.gguf", "bartowski/Qwen-GGUF", "Q4_K_M")
    assert name_of(hub) == "hf.co/bartowski/Qwen-GGUF:Q4_K_M"  # what /api/pull accepts
    folder = entry("/data/Mistral-7B-Instruct-Q5_K_S.gguf", quant="Q5_K_S")
    assert name_of(folder) == "mistral-7b-instruct:Q5_K_S"
    assert name_of(entry("my model (v2)")) == "my-model-v2:latest"


def test_names_stay_apart_and_are_the_same_every_time() -> None:
    repo = "o/Multi-GGUF"
    small = entry(f"{repo}/Multi-0.5B-Q4_K_M.gguf", repo, "Q4_K_M")
    large = entry(f"{repo}/Multi-7B-Q4_K_M.gguf", repo, "Q4_K_M")
    third = entry("elsewhere/Multi-7B-Q4_K_M.gguf", repo, "Q4_K_M")
    named = assign([small, large, third])
    assert list(named) == [
        "hf.co/o/Multi-GGUF:Q4_K_M",
        "hf.co/o/Multi-GGUF:Multi-7B-Q4_K_M",
        "elsewhere/Multi-7B-Q4_K_M.gguf",  # its id: the only name left
    ]
    assert assign([small, large, third]) == named
    for name, e in named.items():
        assert find(name, named) is e


def test_names_match_as_ollama_matches_them() -> None:
    q4 = entry("o/R-GGUF/R-Q4_K_M.gguf", "o/R-GGUF", "Q4_K_M")
    q8 = entry("o/R-GGUF/R-Q8_0.gguf", "o/R-GGUF", "Q8_0")
    plain = entry("gemma")
    named = assign([q8, q4, plain])
    assert find("HF.CO/o/r-gguf:q8_0", named) is q8
    assert find("huggingface.co/o/R-GGUF:Q8_0", named) is q8
    assert find("hf.co/o/R-GGUF", named) is q4  # no tag: Q4_K_M, as Ollama picks
    assert find("gemma", named) is plain and find("gemma:latest", named) is plain
    assert find("gemma:7b", named) is None
    two = assign([q8, entry("o/R-GGUF/R-Q6_K.gguf", "o/R-GGUF", "Q6_K")])
    assert find("hf.co/o/R-GGUF", two) is None  # no Q4_K_M and two others: ambiguous


@pytest.mark.parametrize("good", ["tiny", "me/tiny:v1", "a.b_c-d:Q4_K_M", "hf.co/o/r:x"])
def test_copy_destinations_that_are_names(good: str) -> None:
    assert check_name(good) == good


@pytest.mark.parametrize("bad", ["", " ", "bad name!", "x:", "../x", "a//b", "x" * 400, "t:a b"])
def test_copy_destinations_that_are_not_names(bad: str) -> None:
    with pytest.raises(ValueError, match=r"name|tag"):
        check_name(bad)


def test_aliases_name_a_model_until_removed(tmp_path: Path) -> None:
    store = AliasStore(tmp_path / "aliases.json")
    model, other = entry("gemma"), entry("qwen")
    store.add("Mine", "gemma")
    store.add("gemma:latest", "qwen")  # a model's own name wins over an alias
    named = named_models([model, other], store.load())
    assert find("mine:latest", named) is model
    assert find("gemma", named) is model
    assert store.remove("MINE:latest") and not store.remove("mine")
    store.add("x", "qwen")
    store.remove_target("qwen")
    assert store.load() == {}
    (tmp_path / "aliases.json").write_text("{not json")
    assert store.load() == {}  # a damaged file is ignored (and said in the log)


def test_the_openai_side_resolves_ollama_names_too() -> None:
    q8 = entry("o/R-GGUF/R-Q8_0.gguf", "o/R-GGUF", "Q8_0")
    chain = ChainCatalog(StaticCatalog([q8]))
    assert chain.resolve("hf.co/o/R-GGUF:Q8_0") is q8
    assert chain.resolve(q8.id) is q8
    assert chain.resolve("hf.co/o/R-GGUF:Q2_K") is None
