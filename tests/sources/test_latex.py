"""LaTeX in abstracts made plain text at ingest (titles stay as written: they name papers without an id): real
abstracts from the seed pages and the arXiv sample, and the prose around markup (prices, identifiers, percent signs)
left as it is."""

from __future__ import annotations

import gzip
import json
import re
from datetime import date

import pytest

from digest.sources import jsonl, pagetext
from digest.sources.latex import plain

from ..conftest import FIXTURES, SEEDS

DAY = date(2026, 6, 12)


def seed_papers() -> dict[str, str]:
    """Title → abstract of every paper the seed pages hold, as the page parser stores them."""
    papers = {}
    for page in sorted(SEEDS.glob("*.txt")):
        for paper in pagetext.parse(page.read_text(encoding="utf-8"), page.name, seen_on=DAY).papers:
            papers[paper.title] = paper.abstract
    return papers


def arxiv_rows() -> dict[str, dict[str, str]]:
    text = gzip.decompress((FIXTURES / "arxiv_sample_head.jsonl.gz").read_bytes()).decode()
    return {row["id"]: row for row in map(json.loads, text.splitlines())}


def test_the_seed_pages_residues_of_latex_are_mended_at_ingest():
    """What Hugging Face's pages leave of LaTeX ("11.1times", "H_2O", "models~(LLMs)", "\\textbf{…}", "{\\it …}",
    "\\%") is plain text in what the page parser stores."""
    papers = seed_papers()
    instinfer = papers["InstInfer: In-Storage Attention Offloading for Cost-Effective Long-Context LLM Inference"]
    assert "by up to 11.1×, compared to existing SSD-based solutions" in instinfer and "11.1times" not in instinfer
    h2o = next(abstract for abstract in papers.values() if "Heavy Hitter Oracle" in abstract)
    assert "Heavy Hitter Oracle (H₂O), a KV cache eviction policy" in h2o and "H_2" not in h2o
    abstracts = list(papers.values())
    assert any("In this paper we introduce hardware and software platform inference" in a for a in abstracts)
    assert any("CUDA-L2 yields +22.0% over torch.matmul on average" in a for a in abstracts)
    assert any("Transformers and large language models (LLMs) have seen rapid adoption" in a for a in abstracts)
    assert any("an R² score of 0.98" in a for a in abstracts)
    for abstract in abstracts:
        assert "\\" not in abstract and not re.search(r"\dtimes", abstract)
        assert "Q4_0" not in abstract or "with Q4_0 quantization" in abstract  # llama.cpp's format keeps its name


def test_arxiv_abstracts_lose_their_markup_at_ingest():
    """Real arXiv abstracts with `$…$` math and commands are stored as the reader should read them; a title is stored
    as written (a paper without an arXiv id is known by it)."""
    rows = arxiv_rows()
    wanted = ("2503.11685", "2503.12827", "2503.11780", "2503.12689", "2503.12875", "2503.13693")
    text = "".join(json.dumps(rows[key]) + "\n" for key in wanted)
    stored = {p.arxiv_id: p for p in jsonl.parse(text, "sample.jsonl", seen_on=DAY).papers}
    assert "enhanced throughput up to 4.64×, and reduction in power" in stored["2503.11685"].abstract
    assert "activation functions (AF) such as tanh, sigmoid, and softmax" in stored["2503.11685"].abstract.replace(
        "Activation Functions", "activation functions")
    assert stored["2503.12827"].title.startswith("GSBAK$^K$: $top$-$K$ Geometric Score-based Black-box")
    assert "crafting top-K adversarial examples" in stored["2503.12827"].abstract
    assert "M²D-LIF" in stored["2503.11780"].abstract
    assert "we introduce MagicID, a novel framework" in stored["2503.12689"].abstract
    assert "Biofouling–communities of organisms" in stored["2503.12875"].abstract
    assert "(AV²A)" in stored["2503.13693"].abstract
    for paper in stored.values():
        assert "$" not in paper.abstract and "\\" not in paper.abstract, paper.abstract


@pytest.mark.parametrize("markup, text", [
    (r"up to 4.64$\times$ faster", "up to 4.64× faster"),
    (r"$30\%$ error reduction", "30% error reduction"),
    (r"$0.93 \pm 0.05$ and $\lambda$", "0.93 ± 0.05 and λ"),
    (r"$O(n^2)$ and $x_{t+1}$, at 0.5$^{\circ}$", "O(n²) and xₜ₊₁, at 0.5°"),
    (r"models ($<$300M parameters), $p = 0.72$", "models (<300M parameters), p = 0.72"),
    (r"\emph{i.e.}, \textit{log det}, {\it torch.matmul} and B\'{e}zier", "i.e., log det, torch.matmul and Bézier"),
    (r"Code is available \href{https://github.com/a/b_c}{here}.", "Code is available here."),
    (r"as ``memory wall'' shows \cite{smith}.", "as “memory wall” shows."),
])
def test_markup_becomes_text(markup, text):
    assert plain(markup) == text


@pytest.mark.parametrize("prose", [
    "It costs $5 and 23% of the budget, $10 with the $5-$10 add-on and approximately $55.",
    "MPI_Send, MPI_Pack and Q4_0 quantization; the a_b identifier and snake_case_1 stay.",
    "Sometimes ~5% better at 3 times the cost, C++ and C# alike, 100% of the time.",
    "A URL https://example.org/~ada/x_1?y=2 and an email ada_l@example.org.",
])
def test_prose_without_markup_is_left_alone(prose):
    assert plain(prose) == prose


def test_every_sample_abstract_without_markup_is_unchanged():
    """Of the 300 arXiv rows, those that hold none of LaTeX's characters come back byte for byte."""
    rows = arxiv_rows().values()
    untouched = [row["abstract"] for row in rows if not any(c in row["abstract"] for c in "\\$~^_`")
                 and "times" not in row["abstract"]]
    assert len(untouched) > 200
    assert [plain(abstract) for abstract in untouched] == untouched
