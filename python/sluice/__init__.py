"""Sluice from Python: models, contexts, logits as numpy arrays, placement, serving residency.

A thin ctypes layer over libsluice.so (runtime/sluice.h); see python/README.md. Errors raise
SluiceError (NotResident for SL_ERR_NOT_RESIDENT) carrying the C library's message.

    import sluice
    m = sluice.Model("m.gguf", placement="gpu", device="sim")
    ctx = m.context(n_ctx=512, all_logits=True)
    ctx.eval(m.tokenize("Hello"))
    logits = ctx.logits_all()          # numpy float32 [n_tokens, n_vocab]
"""
import atexit
import contextlib
import ctypes
import functools
import threading
import weakref
from ctypes import POINTER, byref, c_int32, c_size_t, c_uint64, c_void_p

import numpy as np

from . import _lib

__all__ = ["SluiceError", "NotResident", "Model", "Context", "Runtime", "footprint",
           "eval_batch", "PLACEMENTS", "RESIDENCY"]

RESIDENCY = ("disk", "host", "device", "pinned")                           # sl_residency order
_IO = ("direct", "pread", "mmap")
_GROUPS = ("embd", "output", "core", "ffn", "experts")
_BY = {-1: "mode", -2: "group", -3: "cpu-moe", -4: "device", -5: "index"}
_ERR_RANGE = 9  # SL_ERR_RANGE: a bigger buffer is needed where the call says how big
_NOT_RESIDENT = 10  # SL_ERR_NOT_RESIDENT

_L = None


def lib():
    """The loaded libsluice.so (loaded on first use; SLUICE_LIB names it)."""
    global _L
    if _L is None:
        _L = _lib.load()
    return _L


def _placements():
    """The placement modes in sl_placement order, as the library's one table names them."""
    global _PLACEMENTS
    if _PLACEMENTS is None:
        names, m = [], 0
        while (n := lib().sl_place_mode_name(m)) is not None:
            names.append(n.decode())
            m += 1
        _PLACEMENTS = tuple(names)
    return _PLACEMENTS


_PLACEMENTS = None


def __getattr__(name):
    # PLACEMENTS is read from the library on first use (PEP 562), so no list is kept here.
    if name == "PLACEMENTS":
        return _placements()
    raise AttributeError(f"module 'sluice' has no attribute {name!r}")


class SluiceError(RuntimeError):
    """A failed Sluice call: .status is the status name ("invalid", "io", ...)."""

    def __init__(self, code, msg):
        self.code = code
        self.status = lib().sl_status_name(code).decode()
        super().__init__(f"{self.status}: {msg}")


class NotResident(SluiceError):
    """The model's weights are not on the device (a runtime's acquire or eval)."""


def _check(st, err):
    if st:
        msg = err.msg.decode(errors="replace")
        raise (NotResident if st == _NOT_RESIDENT else SluiceError)(st, msg)


def _type_or_none(t):
    """A reload entry's ggml type code, or None where it has none (SL_RELOAD_NO_TYPE)."""
    return None if t == 0xFFFFFFFF else t


def _int_in(what, v, lo, hi):
    """v as an int in [lo, hi], else TypeError / ValueError naming what: ctypes keeps only
    the low bits of a Python int too big for its C type (rewind(2**32 + 7) rewound to 7)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{what} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{what}={v}: outside [{lo}, {hi}]")
    return int(v)


def _put(o, field, v):
    """o.field = v for a ctypes structure, an integer field's range checked (_int_in)."""
    t = dict(type(o)._fields_)[field]
    code = getattr(t, "_type_", None)
    if code == "?":
        v = bool(v)
    elif isinstance(code, str) and code in "bBhHiIlLqQ":
        bits = 8 * ctypes.sizeof(t)
        lo, hi = (0, 2**bits - 1) if code.isupper() else (-2**(bits - 1), 2**(bits - 1) - 1)
        v = _int_in(field, v, lo, hi)
    setattr(o, field, v)


def _size(what, v):
    """Bytes from an int or a size text ("8G", "512MiB": base/parse.h's grammar)."""
    if v is None:
        return 0
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return _int_in(what, v, 0, 2**64 - 1)
    out, err = c_uint64(), _lib.Error()
    _check(lib().sl_parse_size(what.encode(), str(v).encode(), _lib.URange(0, 2**64 - 1),
                               byref(out), byref(err)), err)
    return out.value


def _model_options(placement="auto", n_gpu_layers=0, override_tensor=None, cpu_moe=False,
                   n_cpu_moe=0, vram_budget=None, gpu_index=None, device=None, io="pread",
                   n_threads=0, budget_ctx=0, no_repack=False):
    o = lib().sl_model_options_default()
    if placement not in _placements():
        raise ValueError(f"placement {placement!r}: one of {', '.join(_placements())}")
    if io not in _IO:
        raise ValueError(f"io {io!r}: one of {', '.join(_IO)}")
    o.placement = _placements().index(placement)
    _put(o, "gpu_layers", n_gpu_layers)
    if isinstance(override_tensor, (list, tuple)):
        override_tensor = ",".join(override_tensor)
    keep = []  # the encoded strings must outlive the call
    for field, v in (("override_tensor", override_tensor), ("gpu_index", gpu_index),
                     ("device", device)):
        if v is not None:
            keep.append(str(v).encode())
            setattr(o, field, keep[-1])
    o.cpu_moe = bool(cpu_moe)
    _put(o, "n_cpu_moe", n_cpu_moe)
    o.vram_budget = _size("vram_budget", vram_budget)
    _put(o, "budget_ctx", budget_ctx)
    o.io = _IO.index(io)
    _put(o, "n_threads", n_threads)
    o.progress = False
    o.no_repack = bool(no_repack)
    return o, keep


def footprint(path, **placement):
    """Device and host bytes of a placement, from the file's metadata alone (no tensor read).
    Keywords as Model's placement options."""
    o, _keep = _model_options(**placement)
    fp, err = _lib.Footprint(), _lib.Error()
    _check(lib().sl_model_footprint(str(path).encode(), byref(o), byref(fp), byref(err)), err)
    return {"device_bytes": fp.device_bytes, "host_bytes": fp.host_bytes,
            "weight_bytes": fp.weight_bytes, "scratch_bytes": fp.scratch_bytes,
            "placement": _placements()[fp.placement], "n_gpu_layers": fp.n_gpu_layers,
            "n_cpu_moe": fp.n_cpu_moe}


def eval_batch(contexts, tokens):
    """Evaluates tokens[i] on contexts[i], for distinct contexts of one model, in one forward
    pass (sl_ctx_eval_batch: continuous batching): each context is left as its own
    eval(tokens[i]) would leave it, with the same logits (bit for bit on the CPU), the weight
    matmuls running over all the rows at once. Together at most contexts[0].n_batch tokens."""
    contexts, tokens = list(contexts), list(tokens)
    if len(contexts) != len(tokens):
        raise ValueError(f"eval_batch: {len(contexts)} contexts but {len(tokens)} token lists")
    for c in contexts:
        if not isinstance(c, Context):
            raise TypeError(f"eval_batch: a Context, not {type(c).__name__}")
    arrs = [_token_array(t, "eval_batch") for t in tokens]
    k = len(contexts)
    hs = (c_void_p * k)(*[c._live() for c in contexts])
    ps = (POINTER(c_int32) * k)(*[a.ctypes.data_as(POINTER(c_int32)) for a in arrs])
    ns = (c_size_t * k)(*[len(a) for a in arrs])
    err = _lib.Error()
    _check(lib().sl_ctx_eval_batch(hs, ps, ns, k, byref(err)), err)
    for c, a in zip(contexts, arrs):
        c._n_last = len(a)
        c._first = 0


class _Handle:
    """A C object with a paired close: usable as a context manager."""

    _h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        """The C handle; ValueError once closed (as a closed file)."""
        if not self._h:
            raise ValueError(f"{type(self).__name__}: used after close()")
        return self._h


def _token_array(tokens, what="tokens"):
    """tokens (a sequence or 1-D array of ints) as a contiguous int32 array; TypeError for
    text, floats or nested sequences, ValueError for ids outside int32."""
    if isinstance(tokens, (str, bytes, bytearray)) or not hasattr(tokens, "__len__"):
        raise TypeError(f"{what}: a sequence of int token ids, not {type(tokens).__name__}")
    a = np.asarray(tokens)
    if a.size == 0:
        return np.zeros(0, dtype=np.int32)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what}: a 1-D sequence of int token ids (got {a.dtype}, "
                        f"{a.ndim}-D)")
    if a.min() < -2**31 or a.max() >= 2**31:
        raise ValueError(f"{what}: ids must fit in int32")
    return np.ascontiguousarray(a, dtype=np.int32)


class Model(_Handle):
    """An open model (sl_model). Placement keywords follow llama.cpp's flags: placement
    ("auto", "gpu", "layers", "experts-cpu", "cpu", "hot-cold"), n_gpu_layers (-ngl),
    override_tensor ("REGEX=BUFT,..." or a list: -ot), cpu_moe, n_cpu_moe, vram_budget (bytes
    or "8G"), gpu_index (.gpuidx for hot-cold), device ("cuda", "sim", "auto"), io ("direct",
    "pread", "mmap"), n_threads, no_repack (-nr: keep Q4_K weights as stored instead of
    repacking the CPU's into Q4_K_R8 at load). Use as a context manager or call close()."""

    def __init__(self, path, _runtime=None, **placement):
        o, _keep = _model_options(**placement)
        h, err = c_void_p(), _lib.Error()
        if _runtime is None:
            st = lib().sl_model_open(str(path).encode(), byref(o), byref(h), byref(err))
        else:
            st = lib().sl_model_open_in(_runtime._h, str(path).encode(), byref(o), byref(h),
                                        byref(err))
        _check(st, err)
        try:
            self.path = str(path)
            self.runtime = _runtime
            i = _lib.ModelInfo()
            lib().sl_model_info_get(h, byref(i))
            self.n_vocab = i.n_vocab
            self.info = {f: getattr(i, f) for f, _ in _lib.ModelInfo._fields_}
            for k in ("arch", "name"):  # the file's bytes: not always UTF-8
                self.info[k] = (self.info[k] or b"").decode(errors="replace")
        except BaseException:
            lib().sl_model_close(h)  # a runtime's model too: Runtime.open never saw it
            raise
        self._h = h

    # Lifetime: each open Context holds a reference to its model (Context.model) and is
    # counted in _n_ctx; close() while contexts are open only marks the model closed, and the
    # last context's close() does the real sl_model_close (never a context over freed weights).
    _n_ctx = 0
    _closing = False

    def close(self):
        """Closes the model; with contexts still open, when the last of them closes."""
        if self._h and not self._closing:
            self._closing = True
            if self.runtime is not None:
                self.runtime._models.discard(self)
        if self._h and self._n_ctx == 0:
            lib().sl_model_close(self._h)
            self._h = None

    def _live(self):
        if self._closing:
            raise ValueError("Model: used after close()")
        return super()._live()

    def __del__(self):
        try:
            if self._h and self.runtime is None:
                self.close()
        except Exception:
            pass

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids (numpy int32) of text (str, or bytes as UTF-8)."""
        if isinstance(text, str):
            b = text.encode()
        elif isinstance(text, (bytes, bytearray, memoryview)):
            b = bytes(text)
        else:
            raise TypeError(f"tokenize: text must be str or bytes, not {type(text).__name__}")
        h = self._live()
        cap = len(b) + 16
        while True:
            buf, n, err = (c_int32 * cap)(), c_size_t(), _lib.Error()
            st = lib().sl_tokenize(h, b, len(b), bool(add_special), bool(parse_special), buf,
                                   cap, byref(n), byref(err))
            if st == _ERR_RANGE and n.value > cap:
                cap = n.value
                continue
            _check(st, err)
            return np.ctypeslib.as_array(buf)[:n.value].copy()

    def detokenize(self, tokens):
        """The text of token ids (a sequence or 1-D array of ints)."""
        t = _token_array(tokens, "detokenize")
        h = self._live()
        cap = 16 * len(t) + 16
        while True:
            buf, n, err = ctypes.create_string_buffer(cap), c_size_t(), _lib.Error()
            st = lib().sl_detokenize(h, t.ctypes.data_as(POINTER(c_int32)), len(t), buf, cap,
                                     byref(n), byref(err))
            if st == _ERR_RANGE and n.value >= cap:
                cap = n.value + 1
                continue
            _check(st, err)
            if n.value < cap:
                return buf.raw[:n.value].decode(errors="replace")
            cap = n.value + 1

    def reload_changed(self):
        """Live tensor swap (sl_reload_changed): reloads the tensors whose files changed since
        they were read, between evaluation steps. Returns {"changed", "files_changed",
        "files_skipped", "reloaded", "refused", "fallback", "seconds", "tensors": [{"name",
        "kind", "old_type", "new_type", "old_bytes", "new_bytes", "where", "message"}]}; a type is
        None where the entry has none (a file, a tensor missing from its file)."""
        kinds = ("reattached", "in_place", "private", "sibling", "refused", "skipped_file",
                 "refused_file")
        rep, err = _lib.ReloadReport(), _lib.Error()
        st = lib().sl_reload_changed(self._live(), byref(rep), byref(err))
        try:
            _check(st, err)
            return {"changed": bool(rep.changed), "files_changed": rep.files_changed,
                    "files_skipped": rep.files_skipped, "reloaded": rep.n_reloaded,
                    "refused": rep.n_refused, "fallback": rep.n_fallback,
                    "seconds": rep.seconds,
                    "tensors": [{"name": e.name.decode(errors="replace"),
                                 "kind": kinds[e.kind] if 0 <= e.kind < len(kinds) else "?",
                                 "old_type": _type_or_none(e.old_type),
                                 "new_type": _type_or_none(e.new_type),
                                 "old_bytes": e.old_bytes, "new_bytes": e.new_bytes,
                                 "where": (e.where or b"").decode(),
                                 "message": e.msg.decode(errors="replace")}
                                for e in (rep.entries[i] for i in range(rep.n))]}
        finally:
            lib().sl_reload_report_free(byref(rep))

    def plan(self):
        """The placement plan: {"mode", "n_gpu_layers", "n_cpu_moe", "device_bytes",
        "host_bytes", "why", "tensors": [{"name", "layer", "group", "bytes", "type",
        "on_device", "split", "hot_frac", "by"}]}."""
        p, t, n, err = POINTER(_lib.PlacePlan)(), POINTER(_lib.PlaceTensor)(), c_size_t(), \
            _lib.Error()
        _check(lib().sl_model_plan_get(self._live(), byref(p), byref(t), byref(n), byref(err)),
               err)
        pl = p.contents
        tensors = []
        for i in range(n.value):
            ti = t[i]
            by = pl.by[i]
            tensors.append({
                "name": ti.name.decode(), "layer": ti.layer, "group": _GROUPS[ti.group],
                "bytes": ti.bytes, "type": (ti.type_name or b"").decode(),
                "on_device": bool(pl.on_device[i]), "split": bool(pl.split[i]),
                "hot_frac": float(pl.hot_frac[i]),
                "by": f"override {by}" if by >= 0 else _BY.get(by, str(by))})
        return {"mode": _placements()[pl.mode], "n_gpu_layers": pl.n_gpu_layers,
                "n_cpu_moe": pl.n_cpu_moe, "device_bytes": pl.device_bytes,
                "host_bytes": pl.host_bytes, "why": pl.why.decode(errors="replace"),
                "tensors": tensors}

    @property
    def residency(self):
        """"disk", "host", "device" or "pinned" (a model outside a runtime: "device")."""
        return RESIDENCY[lib().sl_model_residency(self._live())]

    def context(self, n_ctx=0, n_batch=0, all_logits=False, kv_f16=True, sched=None,
                embeddings=False, profile_steps=False, no_graphs=False, no_pdl=False,
                no_fusion=False):
        """A new Context (kv_f16: F16 KV cache, the default of the library, the CLI's eval,
        generate and serve and of llama.cpp; False for F32; profile_steps: Context.step_profile;
        no_graphs: cuda decode tokens launched kernel by kernel, not replayed as a CUDA graph;
        no_pdl: cuda kernels launched in plain stream order, without programmatic dependent
        launch; no_fusion: cuda steps fused by default launched as separate kernels)."""
        return Context(self, n_ctx=n_ctx, n_batch=n_batch, all_logits=all_logits,
                       kv_f16=kv_f16, sched=sched, embeddings=embeddings,
                       profile_steps=profile_steps, no_graphs=no_graphs, no_pdl=no_pdl,
                       no_fusion=no_fusion)

    def perplexity(self, text, n_ctx=512, chunks=None):
        """llama.cpp's perplexity (tools/run perplexity): the text tokenized once, chunks of
        n_ctx tokens from an empty cache (first token BOS when the model adds one), the second
        half of each scored. Returns (ppl, per-chunk running ppl)."""
        if not isinstance(text, str):
            raise TypeError(f"perplexity: text must be str, not {type(text).__name__}")
        n_ctx = _int_in("perplexity: n_ctx", n_ctx, 4, 2**31 - 1)  # a scored half of >= 2
        if chunks is not None:
            chunks = _int_in("perplexity: chunks", chunks, 1, 2**31 - 1)
        toks = self.tokenize(text)
        bos = self.tokenize("")
        add_bos = len(bos) > 0 and bos[0] == self.info["bos"]
        n_chunk = len(toks) // n_ctx if chunks is None else min(chunks, len(toks) // n_ctx)
        if len(toks) < 2 * n_ctx:
            raise ValueError(f"{len(toks)} tokens; at least {2 * n_ctx} (2 x n_ctx) needed")
        first, nll, running = n_ctx // 2, [], []
        with self.context(n_ctx=n_ctx, n_batch=n_ctx, all_logits=True) as ctx:
            for i in range(n_chunk):
                chunk = toks[i * n_ctx:(i + 1) * n_ctx].copy()
                if add_bos:
                    chunk[0] = self.info["bos"]
                ctx.rewind(0)
                ctx.eval(chunk, logits_from=first)
                lp = _log_softmax(ctx.logits_all()[:n_ctx - 1 - first])
                target = toks[i * n_ctx + first + 1:(i + 1) * n_ctx]
                nll.extend(-lp[np.arange(len(target)), target])
                running.append(float(np.exp(np.mean(nll))))
        return running[-1], running

    def generate(self, prompt, n_predict=32, temp=0.0, top_k=40, top_p=0.95, min_p=0.05,
                 seed=0, n_ctx=0, stop_at_eos=True, grammar=None):
        """Text continuing prompt (greedy with temp <= 0). grammar: a GBNF grammar (llama.cpp's
        language) the text must follow (sl_sampler_set_grammar); generation then also ends
        when the grammar is complete. A malformed grammar raises SluiceError naming its line
        and column."""
        if not isinstance(prompt, str):
            raise TypeError(f"generate: prompt must be str, not {type(prompt).__name__}")
        if grammar is not None and not isinstance(grammar, str):
            raise TypeError(f"generate: grammar must be str or None, not "
                            f"{type(grammar).__name__}")
        toks = list(self.tokenize(prompt))
        with self.context(n_ctx=n_ctx) as ctx:
            out = []
            so = _lib.SamplerOptions(temp, top_k, top_p, min_p, seed)
            s, err = c_void_p(), _lib.Error()
            _check(lib().sl_sampler_create(byref(so), byref(s), byref(err)), err)
            try:
                if grammar:
                    _check(lib().sl_sampler_set_grammar(s, self._live(), grammar.encode(),
                                                        byref(err)), err)
                # each step evaluates and samples in one call: a greedy pick happens where the
                # output layer ran (on a GPU only the token id comes back)
                tok = ctx._eval_sample(s, toks)
                for _ in range(n_predict):
                    if stop_at_eos and lib().sl_token_is_eog(self._live(), tok):
                        break
                    out.append(tok)
                    if len(out) == n_predict or ctx.n_past >= ctx.n_ctx:
                        break
                    if lib().sl_sampler_grammar_done(s):
                        break  # the grammar is complete: nothing more can follow
                    tok = ctx._eval_sample(s, [tok])
            finally:
                lib().sl_sampler_destroy(s)
        return self.detokenize(out)


def _log_softmax(rows):
    rows = rows.astype(np.float64)
    mx = rows.max(axis=-1, keepdims=True)
    return rows - mx - np.log(np.exp(rows - mx).sum(axis=-1, keepdims=True))


def _exclusive(method):
    """A Context method that calls into its sl_ctx: one at a time. ctypes releases the GIL,
    so two threads' eval() (or close() beside an eval) ran on one sl_ctx at once, which the
    C API does not allow; the second caller gets RuntimeError instead of a data race."""
    @functools.wraps(method)
    def run(self, *a, **k):
        use = self.__dict__.get("_use")
        if use is None:
            return method(self, *a, **k)
        if not use.acquire(blocking=False):
            raise RuntimeError(f"Context.{method.__name__}: the context is in use by another "
                               "thread (a context runs one call at a time)")
        try:
            return method(self, *a, **k)
        finally:
            use.release()
    return run


class Context(_Handle):
    """An evaluation context (sl_ctx): KV cache, logits of the last eval. One call at a time:
    a second thread's call while one runs raises RuntimeError."""

    def __init__(self, model, n_ctx=0, n_batch=0, all_logits=False, kv_f16=True, sched=None,
                 embeddings=False, profile_steps=False, no_graphs=False, no_pdl=False,
                 no_fusion=False):
        if not isinstance(model, Model):
            raise TypeError(f"Context: model must be a sluice.Model, not {type(model).__name__}")
        mh = model._live()
        o = lib().sl_ctx_options_default()
        _put(o, "n_ctx", n_ctx)
        _put(o, "n_batch", n_batch)
        o.all_logits, o.kv_f16 = bool(all_logits), bool(kv_f16)
        o.embeddings = bool(embeddings)
        o.profile_steps = bool(profile_steps)
        o.no_graphs = bool(no_graphs)
        o.no_pdl = bool(no_pdl)
        o.no_fusion = bool(no_fusion)
        self._sched = sched.encode() if sched else None
        o.sched = self._sched
        h, err = c_void_p(), _lib.Error()
        _check(lib().sl_ctx_create(mh, byref(o), byref(h), byref(err)), err)
        self._h = h
        self._use = threading.Lock()  # _exclusive: one call at a time
        self.model = model  # keeps the model open (Model.close defers to the last context)
        model._n_ctx += 1
        self.all_logits = all_logits
        self.keeps_embeddings = bool(embeddings)
        self.n_ctx = n_ctx or min(model.info["n_ctx_train"], 4096)
        self._n_last = 0
        self._first = 0

    @_exclusive
    def close(self):
        if self._h:
            lib().sl_ctx_destroy(self._h)
            self._h = None
            m = self.model
            m._n_ctx -= 1
            if m._closing and m._n_ctx == 0:
                m.close()  # the model's close() deferred to its last context

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @_exclusive
    def eval(self, tokens, logits_from=0):
        """Appends tokens (ints or a numpy array) at positions n_past.. to the cache. With
        logits_from > 0 (an all_logits context) the output layer runs only for the tokens
        from that index on (llama.cpp's batch.logits on a tail, as its perplexity does): the
        same values for those rows, the others not computed."""
        t = _token_array(tokens, "eval")
        if isinstance(logits_from, bool) or not isinstance(logits_from, (int, np.integer)):
            raise ValueError(f"logits_from={logits_from!r}: an index into the {len(t)} tokens")
        if not 0 <= logits_from < max(len(t), 1):
            raise ValueError(f"logits_from={logits_from!r}: an index into the {len(t)} tokens")
        h, err = self._live(), _lib.Error()
        if logits_from:
            _check(lib().sl_ctx_eval_tail(h, t.ctypes.data_as(POINTER(c_int32)), len(t),
                                          logits_from, byref(err)), err)
        else:
            _check(lib().sl_ctx_eval(h, t.ctypes.data_as(POINTER(c_int32)), len(t),
                                     byref(err)), err)
        self._n_last = len(t)
        self._first = logits_from

    @_exclusive
    def _eval_sample(self, sampler, tokens):
        """eval(tokens), then the next token from sampler (sl_ctx_eval_sample)."""
        t = _token_array(tokens, "generate")
        err, nxt = _lib.Error(), c_int32()
        _check(lib().sl_ctx_eval_sample(self._live(), sampler, t.ctypes.data_as(POINTER(c_int32)),
                                        len(t), byref(nxt), byref(err)), err)
        self._n_last = len(t)
        self._first = 0
        return nxt.value

    @property
    def n_batch(self):
        """Tokens one forward pass takes (n_batch, at most n_ctx): eval_batch's limit."""
        return lib().sl_ctx_n_batch(self._live())

    @_exclusive
    def logits(self, i=-1):
        """Logits row i of the last eval (numpy float32 [n_vocab], a copy)."""
        i = _int_in("logits: row index", i, -1, 2**63 - 1)
        p = lib().sl_ctx_logits(self._live(), i)
        if not p:
            raise IndexError(f"logits row {i}: not available (all_logits={self.all_logits})")
        return np.ctypeslib.as_array(p, shape=(self.model.n_vocab,)).copy()

    @_exclusive
    def embeddings(self, i=None):
        """The final hidden state (after the output norm) of the last eval's row i, float32
        [n_embd] (a copy); i None: every row, [n_tokens, n_embd]. Needs embeddings=True."""
        if i is not None:
            i = _int_in("embeddings: row index", i, -1, 2**63 - 1)
        if not self.keeps_embeddings:
            raise ValueError("embeddings needs a context created with embeddings=True")
        n_embd = self.model.info["n_embd"]
        p = lib().sl_ctx_embeddings(self._live(), 0 if i is None else i)
        if not p:
            raise IndexError(f"embeddings row {i}: not available")
        shape = (n_embd,) if i is not None else (self._n_last, n_embd)
        return np.ctypeslib.as_array(p, shape=shape).copy()

    @_exclusive
    def logits_all(self):
        """Every row the last eval computed (needs all_logits=True): float32 [n_tokens, n_vocab],
        or [n_tokens - logits_from, n_vocab] after eval(tokens, logits_from)."""
        if not self.all_logits:
            raise ValueError("logits_all needs a context created with all_logits=True")
        p = lib().sl_ctx_logits(self._live(), self._first)
        if not p:
            raise IndexError("no logits yet")
        return np.ctypeslib.as_array(p, shape=(self._n_last - self._first,
                                               self.model.n_vocab)).copy()

    @property
    def n_past(self):
        return lib().sl_ctx_n_past(self._live())

    @_exclusive
    def rewind(self, n_past=0):
        n_past = _int_in("rewind: n_past", n_past, 0, 2**31 - 1)
        err = _lib.Error()
        _check(lib().sl_ctx_rewind(self._live(), n_past, byref(err)), err)

    @_exclusive
    def stats(self):
        s = _lib.CtxStats()
        lib().sl_ctx_stats_get(self._live(), byref(s))
        d = {f: getattr(s, f) for f, _ in _lib.CtxStats._fields_}
        d["moe_scheduler"] = (d["moe_scheduler"] or b"").decode() or None
        d["moe_mode"] = (d["moe_mode"] or b"").decode() or None
        d["graph_error"] = (d["graph_error"] or b"").decode(errors="replace") or None
        return d

    @_exclusive
    def step_profile(self):
        """The device executor's steps so far (sl_ctx_step_profile; a context made with
        profile_steps=True): {kind: {"calls", "seconds", "gap_seconds"}}, every kind listed."""
        n, err = c_size_t(0), _lib.Error()
        rows = (_lib.StepProfile * 64)()
        _check(lib().sl_ctx_step_profile(self._live(), rows, 64, byref(n), byref(err)), err)
        return {r.op.decode(): {"calls": r.calls, "seconds": r.seconds,
                                "gap_seconds": r.gap_seconds} for r in rows[:n.value]}


def _close_at_exit(ref):
    rt = ref()
    if rt is not None:
        try:
            rt.close()
        except SluiceError:
            pass  # a model still in use: the process ends anyway


class Runtime(_Handle):
    """Several models sharing one device arena and host pool (sl_runtime): budget, LRU
    eviction (mode "self") or caller-driven residency (mode "external"), pinned models,
    compaction; shared_floor=True shares each model's host copy with the other processes of
    the node (POSIX shared memory, shm_mode permission bits); opening a model whose floor
    another process is filling waits at most shm_wait_ms (0: ten minutes), then raises naming
    that process. Close its models before the runtime (close() closes those still open)."""

    def __init__(self, device=None, arena_bytes=None, weight_fraction=0.9,
                 wiggle_fraction=0.05, max_scratch_bytes=None, mode="self",
                 host_slab_bytes=None, shared_floor=False, shm_mode=0o600, shm_prefix=None,
                 shm_wait_ms=0):
        o = lib().sl_runtime_options_default()
        self._device = device.encode() if device else None
        o.device = self._device
        o.arena_bytes = _size("arena_bytes", arena_bytes)
        o.weight_fraction, o.wiggle_fraction = weight_fraction, wiggle_fraction
        o.max_scratch_bytes = _size("max_scratch_bytes", max_scratch_bytes)
        if mode not in ("self", "external"):
            raise ValueError(f"mode {mode!r}: self or external")
        o.mode = 0 if mode == "self" else 1
        o.host_slab_bytes = _size("host_slab_bytes", host_slab_bytes)
        o.shared_floor = bool(shared_floor)
        _put(o, "shm_mode", shm_mode)
        _put(o, "shm_wait_ms", shm_wait_ms)
        self._prefix = shm_prefix.encode() if shm_prefix else None
        o.shm_prefix = self._prefix
        h, err = c_void_p(), _lib.Error()
        _check(lib().sl_runtime_create(byref(o), byref(h), byref(err)), err)
        self._h = h
        self._models = set()
        # a program that exits without close() would leave its shared floors in /dev/shm (and
        # its models open): closed at interpreter exit; the weak reference keeps GC as it was
        atexit.register(_close_at_exit, weakref.ref(self))

    def open(self, path, **placement):
        """Opens a model into the runtime; it starts on its host floor ("host")."""
        m = Model(path, _runtime=self, **placement)
        self._models.add(m)
        return m

    def acquire(self, model):
        err = _lib.Error()
        _check(lib().sl_runtime_acquire(self._live(), model._live(), byref(err)), err)

    def hold(self, model):
        """acquire() that also keeps the model on the device until unhold(): never evicted,
        moved, unpinned away or compacted between evaluations (a whole request's worth)."""
        err = _lib.Error()
        _check(lib().sl_runtime_hold(self._live(), model._live(), byref(err)), err)

    def unhold(self, model):
        """Ends one hold() (none held: no effect)."""
        lib().sl_runtime_unhold(self._live(), model._live())

    @contextlib.contextmanager
    def held(self, model):
        """with rt.held(model): ... — hold() for the block."""
        self.hold(model)
        try:
            yield model
        finally:
            self.unhold(model)

    def set_residency(self, model, state):
        if state not in RESIDENCY:
            raise ValueError(f"residency {state!r}: one of {', '.join(RESIDENCY)}")
        err = _lib.Error()
        _check(lib().sl_runtime_set_residency(self._live(), model._live(),
                                              RESIDENCY.index(state), byref(err)), err)

    def release_all(self, model):
        err = _lib.Error()
        _check(lib().sl_runtime_release_all(self._live(), model._live(), byref(err)), err)

    def compact(self, reload=()):
        arr = (c_void_p * max(len(reload), 1))(*[m._live() for m in reload])
        err = _lib.Error()
        _check(lib().sl_runtime_compact(self._live(), arr, len(reload), byref(err)), err)

    def stats(self):
        s = _lib.RuntimeStats()
        lib().sl_runtime_stats_get(self._live(), byref(s))
        return {f: getattr(s, f) for f, _ in _lib.RuntimeStats._fields_}

    def model_info(self, model):
        i, err = _lib.RuntimeModelInfo(), _lib.Error()
        _check(lib().sl_runtime_model_info_get(self._live(), model._live(), byref(i),
                                               byref(err)), err)
        d = {f: getattr(i, f) for f, _ in _lib.RuntimeModelInfo._fields_}
        d["state"] = RESIDENCY[d["state"]]
        d["floor_name"] = d["floor_name"].decode()
        return d

    def close(self):
        if self._h:
            for m in list(self._models):
                m.close()
            err = _lib.Error()
            _check(lib().sl_runtime_destroy(self._h, byref(err)), err)
            self._h = None

    def __del__(self):
        # a Runtime dropped without close() (its models refer back to it, so this runs when
        # the garbage collector takes the cycle): its floors go now, not at interpreter exit
        try:
            self.close()
        except Exception:
            pass

