"""ctypes mirror of runtime/sluice.h: the structures, the functions' signatures, the library.

The library is libsluice.so (//runtime:libsluice.so), found in this order:
  1. libsluice.so next to this package (what `pip install ./python` ships);
  2. the SLUICE_LIB environment variable (a path to the .so file);
  3. bazel-bin/runtime/libsluice.so of the repository this package sits in (from the source);
  4. libsluice.so through the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig).
Every structure here must match sluice.h field for field; python/tests check the sizes that
the layout decides against values computed the C way.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double,
                    c_float, c_int, c_int16, c_int32, c_int64, c_size_t, c_uint32, c_uint64,
                    c_void_p)

ERROR_MSG_BYTES = 1024


class Error(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * ERROR_MSG_BYTES)]


class _Sized(Structure):
    """An option struct of sluice.h: struct_size first, set to this mirror's size on creation
    (the library refuses another size, so a mirror that no longer matches the header fails
    with a message instead of being read with the wrong layout)."""

    def __init__(self, *args, **kw):
        super().__init__(ctypes.sizeof(type(self)), *args, **kw)


class ModelOptions(_Sized):
    _fields_ = [
        ("struct_size", c_size_t), ("placement", c_int), ("gpu_layers", c_int), ("override_tensor", c_char_p),
        ("cpu_moe", c_bool), ("n_cpu_moe", c_int), ("vram_budget", c_uint64),
        ("budget_ctx", c_int), ("plan_only", c_bool), ("gpu_index", c_char_p),
        ("device", c_char_p), ("io", c_int), ("numa_node", c_int), ("n_threads", c_int),
        ("cpus", c_char_p), ("progress", c_bool), ("no_repack", c_bool),
    ]


class ModelInfo(Structure):
    _fields_ = [
        ("arch", c_char_p), ("name", c_char_p),
        ("n_vocab", c_int32), ("n_ctx_train", c_int32), ("n_embd", c_int32),
        ("n_layer", c_int32), ("n_head", c_int32), ("n_head_kv", c_int32),
        ("head_dim", c_int32), ("n_expert", c_int32), ("n_expert_used", c_int32),
        ("n_ff", c_int32), ("n_ff_exp", c_int32),
        ("n_params", c_uint64), ("weight_bytes", c_uint64), ("gpu_bytes", c_uint64),
        ("host_bytes", c_uint64), ("bos", c_int32), ("eos", c_int32),
        ("device_copies_pageable", c_uint64), ("device_region_allocs", c_uint64),
        ("device_host_registers", c_uint64), ("repacked_tensors", c_uint64),
        ("repacked_bytes", c_uint64), ("n_threads", c_int32),
    ]


class ReloadEntry(Structure):  # sluice.h sl_reload_entry
    _fields_ = [("name", c_char * 96), ("kind", c_int), ("old_type", c_uint32),
                ("new_type", c_uint32), ("old_bytes", c_uint64), ("new_bytes", c_uint64),
                ("where", c_char_p), ("seconds", c_double), ("msg", c_char * 160),
                ("file", c_char_p)]


class ReloadReport(Structure):  # sluice.h sl_reload_report
    _fields_ = [("changed", c_bool), ("entries", POINTER(ReloadEntry)), ("n", c_size_t),
                ("files_changed", c_uint32), ("files_skipped", c_uint32),
                ("n_reloaded", c_uint32), ("n_refused", c_uint32), ("n_fallback", c_uint32),
                ("bytes_read", c_uint64), ("seconds", c_double), ("files_refused", c_uint32)]


class CtxOptions(_Sized):
    _fields_ = [("struct_size", c_size_t), ("n_ctx", c_int32), ("n_batch", c_int32), ("kv_f16", c_bool),
                ("all_logits", c_bool), ("sched", c_char_p), ("neuron_stats", c_bool),
                ("relu_dense", c_bool), ("embeddings", c_bool), ("profile_steps", c_bool),
                ("no_graphs", c_bool), ("no_pdl", c_bool), ("no_fusion", c_bool)]


class StepProfile(Structure):  # sluice.h sl_step_profile
    _fields_ = [("op", c_char_p), ("calls", c_uint64), ("seconds", c_double),
                ("gap_seconds", c_double)]


class CtxStats(Structure):
    _fields_ = [
        ("prefill_tokens", c_uint64), ("decode_tokens", c_uint64),
        ("prefill_seconds", c_double), ("decode_seconds", c_double),
        ("expert_calls_cpu", c_uint64), ("expert_calls_gpu", c_uint64),
        ("moe_scheduler", c_char_p),
        ("expert_fetches", c_uint64), ("expert_fallbacks", c_uint64),
        ("expert_cache_lookups", c_uint64), ("expert_cache_hits", c_uint64),
        ("copies", c_uint64), ("copy_bytes", c_uint64), ("copy_overlap_pct", c_double),
        ("ffn_neurons", c_uint64), ("ffn_neurons_zero", c_uint64),
        ("ffn_neurons_skipped", c_uint64), ("refreshes", c_uint64),
        ("rebinds", c_uint64), ("moe_mode", c_char_p),
        ("moe_calls_cpu", c_uint64), ("moe_calls_post", c_uint64), ("moe_calls_full", c_uint64),
        ("dev_syncs", c_uint64), ("dev_calls", c_uint64),
        ("expert_cpu_bytes", c_uint64), ("expert_cpu_seconds", c_double),
        ("dev_layer_steps", c_uint64), ("dev_layers", c_uint64),
        ("graph_passes", c_uint64), ("graph_captures", c_uint64), ("graph_failures", c_uint64),
        ("graph_error", c_char_p),
        ("stream_layers", c_uint64), ("stream_bytes", c_uint64),
        ("hot_experts", c_uint64), ("hot_bytes", c_uint64), ("pdl", c_bool),
        ("dev_layer_launches", c_uint64),
    ]


class SamplerOptions(_Sized):
    _fields_ = [("struct_size", c_size_t), ("temp", c_float), ("top_k", c_int32), ("top_p", c_float), ("min_p", c_float),
                ("seed", c_uint64)]


class PlaceTensor(Structure):  # scheduler/policy/placement.h
    _fields_ = [("name", c_char_p), ("layer", c_int32), ("group", c_int),
                ("vector", c_bool), ("tied", c_bool), ("no_device", c_bool),
                ("bytes", c_uint64), ("type_name", c_char_p)]


PLACE_MAX_OVERRIDES = 64


class PlacePlan(Structure):  # scheduler/policy/placement.h
    _fields_ = [
        ("n", c_size_t), ("on_device", POINTER(c_bool)), ("split", POINTER(c_bool)),
        ("hot_frac", POINTER(c_float)), ("by", POINTER(c_int16)), ("mode", c_int),
        ("n_gpu_layers", c_int32), ("n_cpu_moe", c_int32),
        ("device_bytes", c_uint64), ("host_bytes", c_uint64), ("budget", c_uint64),
        ("budget_known", c_bool), ("n_override", c_int),
        ("override_text", (c_char * 96) * PLACE_MAX_OVERRIDES), ("why", c_char * 160),
    ]


class Footprint(Structure):
    _fields_ = [("device_bytes", c_uint64), ("host_bytes", c_uint64),
                ("weight_bytes", c_uint64), ("scratch_bytes", c_uint64),
                ("placement", c_int), ("n_gpu_layers", c_int32), ("n_cpu_moe", c_int32)]


NOTICE = CFUNCTYPE(None, c_void_p, c_char_p)
PROGRESS = CFUNCTYPE(None, c_void_p, c_uint64, c_uint64)


class RuntimeOptions(_Sized):
    _fields_ = [
        ("struct_size", c_size_t), ("device", c_char_p), ("arena_bytes", c_uint64), ("weight_fraction", c_double),
        ("wiggle_fraction", c_double), ("max_scratch_bytes", c_uint64), ("mode", c_int),
        ("numa_node", c_int), ("host_slab_bytes", c_uint64), ("shared_floor", c_bool),
        ("shm_mode", c_uint32), ("shm_prefix", c_char_p), ("floor_progress", PROGRESS),
        ("floor_progress_user", c_void_p), ("notice", NOTICE), ("notice_user", c_void_p),
        ("shm_wait_ms", c_uint32), ("shm_cancelled", c_void_p), ("shm_cancelled_user", c_void_p),
    ]


class RuntimeStats(Structure):
    _fields_ = [
        ("arena_bytes", c_uint64), ("scratch_ceiling", c_uint64), ("weight_pool", c_uint64),
        ("on_demand_budget", c_uint64), ("pinned_bytes", c_uint64), ("over_commit", c_bool),
        ("resident_bytes", c_uint64), ("arena_in_use", c_uint64), ("arena_free", c_uint64),
        ("arena_largest_free", c_uint64), ("arena_free_chunks", c_uint64),
        ("loads", c_uint64), ("evictions", c_uint64), ("compactions", c_uint64),
        ("bytes_loaded", c_uint64), ("n_models", c_uint32),
    ]


class RuntimeModelInfo(Structure):
    _fields_ = [("state", c_int), ("device_bytes", c_uint64), ("last_use", c_uint64),
                ("busy", c_int), ("d_lo", c_uint64), ("d_hi", c_uint64),
                ("d_digest", c_uint64), ("floor_name", c_char * 96),
                ("floor_materialized", c_bool), ("floor_digest_checked", c_bool)]


class URange(Structure):
    _fields_ = [("lo", c_uint64), ("hi", c_uint64)]


def _find():
    pkg = os.path.dirname(os.path.abspath(__file__))
    here = os.path.join(pkg, "libsluice.so")
    if os.path.exists(here):
        return here
    env = os.environ.get("SLUICE_LIB")
    if env:
        return env
    built = os.path.join(pkg, "..", "..", "bazel-bin", "runtime", "libsluice.so")
    return os.path.normpath(built) if os.path.exists(built) else "libsluice.so"


def load():
    """Loads the library and declares every function this package calls."""
    path = _find()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise OSError(f"sluice: cannot load {path} ({e}); `pip install ./python` ships the "
                      "library, or set SLUICE_LIB to the path of libsluice.so (bazel build "
                      "//runtime:libsluice.so)") from e
    E = POINTER(Error)
    P = c_void_p
    sigs = {
        "sl_status_name": (c_char_p, [c_int]),
        "sl_model_options_default": (ModelOptions, []),
        "sl_model_open": (c_int, [c_char_p, POINTER(ModelOptions), POINTER(P), E]),
        "sl_model_close": (None, [P]),
        "sl_model_info_get": (None, [P, POINTER(ModelInfo)]),
        "sl_model_plan_get": (c_int, [P, POINTER(POINTER(PlacePlan)),
                                      POINTER(POINTER(PlaceTensor)), POINTER(c_size_t), E]),
        "sl_model_footprint": (c_int, [c_char_p, POINTER(ModelOptions), POINTER(Footprint),
                                       E]),
        "sl_tokenize": (c_int, [P, c_char_p, c_size_t, c_bool, c_bool, POINTER(c_int32),
                                c_size_t, POINTER(c_size_t), E]),
        "sl_token_is_eog": (c_bool, [P, c_int32]),
        "sl_detokenize": (c_int, [P, POINTER(c_int32), c_size_t, c_char_p, c_size_t,
                                  POINTER(c_size_t), E]),
        "sl_ctx_options_default": (CtxOptions, []),
        "sl_ctx_create": (c_int, [P, POINTER(CtxOptions), POINTER(P), E]),
        "sl_ctx_destroy": (None, [P]),
        "sl_ctx_eval": (c_int, [P, POINTER(c_int32), c_size_t, E]),
        "sl_ctx_eval_tail": (c_int, [P, POINTER(c_int32), c_size_t, c_size_t, E]),
        "sl_ctx_eval_sample": (c_int, [P, P, POINTER(c_int32), c_size_t, POINTER(c_int32), E]),
        "sl_ctx_eval_batch": (c_int, [POINTER(P), POINTER(POINTER(c_int32)), POINTER(c_size_t),
                                      c_size_t, E]),
        "sl_ctx_n_batch": (c_int32, [P]),
        "sl_ctx_logits": (POINTER(c_float), [P, c_int64]),
        "sl_ctx_n_past": (c_int32, [P]),
        "sl_ctx_embeddings": (POINTER(c_float), [P, c_int64]),
        "sl_ctx_rewind": (c_int, [P, c_int32, E]),
        "sl_ctx_stats_get": (None, [P, POINTER(CtxStats)]),
        "sl_ctx_step_profile": (c_int, [P, POINTER(StepProfile), c_size_t, POINTER(c_size_t), E]),
        "sl_sampler_options_default": (SamplerOptions, []),
        "sl_sampler_create": (c_int, [POINTER(SamplerOptions), POINTER(P), E]),
        "sl_sampler_destroy": (None, [P]),
        "sl_sampler_sample": (c_int, [P, POINTER(c_float), c_int32, POINTER(c_int32), E]),
        "sl_sampler_set_grammar": (c_int, [P, P, c_char_p, E]),
        "sl_sampler_grammar_done": (c_bool, [P]),
        "sl_parse_size": (c_int, [c_char_p, c_char_p, URange, POINTER(c_uint64), E]),
        "sl_runtime_options_default": (RuntimeOptions, []),
        "sl_runtime_create": (c_int, [POINTER(RuntimeOptions), POINTER(P), E]),
        "sl_runtime_destroy": (c_int, [P, E]),
        "sl_model_open_in": (c_int, [P, c_char_p, POINTER(ModelOptions), POINTER(P), E]),
        "sl_runtime_acquire": (c_int, [P, P, E]),
        "sl_runtime_set_residency": (c_int, [P, P, c_int, E]),
        "sl_runtime_release_all": (c_int, [P, P, E]),
        "sl_runtime_hold": (c_int, [P, P, E]),
        "sl_runtime_unhold": (None, [P, P]),
        "sl_runtime_compact": (c_int, [P, POINTER(P), c_size_t, E]),
        "sl_model_residency": (c_int, [P]),
        "sl_runtime_stats_get": (None, [P, POINTER(RuntimeStats)]),
        "sl_runtime_model_info_get": (c_int, [P, P, POINTER(RuntimeModelInfo), E]),
        "sl_reload_changed": (c_int, [P, POINTER(ReloadReport), E]),
        "sl_reload_report_free": (None, [POINTER(ReloadReport)]),
        "sl_place_mode_name": (c_char_p, [c_int]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib
