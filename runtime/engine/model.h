/* runtime/engine/model.h: the engine's model — hyperparameters, architecture traits, bound weights
 * (private to runtime/; the public handle is sl_model of runtime/sluice.h).
 *
 * Opening (model.c): sl_gguf_open, read hyperparameters as llama.cpp's load_hparams does
 * (arch.c), bind every tensor the architecture needs by llama.cpp's names with its expected
 * shape in ggml ne order (a missing or mis-shaped tensor is SL_ERR_FORMAT naming it and the
 * expected shape), decide each weight's placement, load (weight.c). The gguf handle stays open
 * for the model's lifetime: weights keep pointers to its tensor records (provenance).
 *
 * Invariants after a successful open:
 *   every sl_weight pointer in layers[] points into w[0 .. n_w), each bound once;
 *   every weight has residency != 0 and data != NULL;
 *   hp.n_head % hp.n_head_kv == 0, hp.head_dim even, hp.n_rot <= hp.head_dim;
 *   MoE layers (hp.n_expert > 0) have a router and, for each expert e, gate/up/down pointers.
 * After open it changes only in a live reload (reload.c, scheduler/policy/swap.h), which holds
 * `gate` exclusively while it changes weights, expert pointers and the plan record; contexts
 * read it inside steps that hold the gate shared.
 */
#ifndef SL_RUNTIME_MODEL_H
#define SL_RUNTIME_MODEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "alloc/bfc.h"
#include "alloc/hostpool.h"
#include "runtime/engine/cpu_threads.h"
#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "kernels/ref/ops.h"
#include "base/device/device.h"
#include "base/fault.h"
#include "runtime/sluice.h"
#include "runtime/text/tokenizer.h"
#include "scheduler/weights.h"
#include "scheduler/moe/moe.h"
#include "scheduler/policy/placement.h"
#include "scheduler/policy/swap.h"


typedef enum sl__qk_norm {
    SL__QK_NORM_NONE = 0,
    SL__QK_NORM_HEAD,       /* RMSNorm of each head (weight [head_dim]): qwen3moe, gemma3 */
    SL__QK_NORM_FULL,       /* RMSNorm of the whole projection (weight [H*D]): olmoe */
    SL__QK_NORM_HEAD_OPT,   /* per head where the file has the weight, q and k each
                               (glm4moe: GLM-4.5 has them, GLM-4.5-Air not) */
} sl__qk_norm;

/* What distinguishes the architectures in the forward pass (arch.c's table). */
typedef struct sl__arch_traits {
    sl_rope_mode rope;      /* llama.cpp's llama_model_rope_type */
    sl__qk_norm qk_norm;
    bool post_norms;        /* attn_post_norm, ffn_post_norm (gemma3) */
    bool embd_scale;        /* embeddings * sqrt(n_embd) (gemma2, gemma3) */
    bool moe_capable;       /* may have routed experts */
    bool moe_required;      /* must have them */
    bool norm_topk;         /* renormalise the top-k softmax weights */
    bool shared_expert;     /* ffn_*_shexp + sigmoid gate (qwen2moe); the DeepSeek-MoE
                               archs' shared experts are ungated (arch_ds_moe.c) */
    int32_t swa_period;     /* layer il slides iff il % period < period - 1 (llama.cpp's
                               set_swa_pattern): 6 gemma3, 2 gpt-oss; 0: no sliding window */
    bool attn_out_bias;     /* attn_output.bias (gpt-oss) */
    bool attn_sinks;        /* attn_sinks.weight [n_head]: a logit per head that joins the
                               softmax denominator (gpt-oss) */
    bool moe_biases;        /* router bias ffn_gate_inp.bias and expert biases ffn_*_exps.bias
                               (gpt-oss) */
    bool post_attn_ffn_norm; /* the FFN's input norm is named post_attention_norm (gpt-oss) */
    sl_gating gating;       /* router: softmax then top-k, or top-k then softmax (gpt-oss) */
    sl_moe_act act;
    bool mla;               /* multi-head latent attention (deepseek2) */
    bool mtp;               /* llama.cpp's loader knows the MTP blocks past the trunk
                               (nextn_predict_layers): their tensors are not refused */
    bool rot_whole;         /* llama.cpp asserts rope.dimension_count == key_length (dots1,
                               ernie4_5, qwen3vl, hunyuan-moe): other files are refused */
    bool qk_norm_after_rope; /* the per-head q/k norms after the rope (hunyuan-moe) */
    bool q_embd;            /* llama.cpp sizes q by n_embd: head_count * key_length must be
                               embedding_length (qwen2, qwen2moe, olmoe, phi3, bailingmoe2) */
    bool rope_freqs;        /* an optional rope_freqs.weight [n_rot / 2], or with
                               rope.scaling.type "longrope" the LongRoPE factors (llama,
                               granite) */
    bool longrope;          /* optional rope_factors_long / _short [n_rot / 2] whatever the
                               scaling type (phi3) */
    bool llama_biases;      /* optional attn_output.bias and dense ffn_{gate,up,down}.bias
                               (llama, granite) */
    bool output_bias;       /* an optional output.bias [n_vocab] (qwen2) */
    bool fused;             /* bind_layer binds the dense FFN: ffn_up [n_embd, 2 n_ff] =
                               gate | up (phi3) */
    int32_t swa_default;    /* attention.sliding_window when absent (gemma2: 4096); 0: required */
    bool own_attn;          /* bind_layer binds each layer's attention (or recurrent mixer);
                               the FFN is the common one (qwen3next) */
    bool recurrent;         /* some layers are Gated DeltaNet layers with recurrent state in
                               the context (qwen3next; arch_qwen3next.c) */
    /* The arch's own keys and tensors (arch_<name>.c); NULL: none. Each runs where the common
     * code leaves that part to the arch. sl__hparams_load: expert_widths after the common
     * expert keys, in place of the dense width (n_ff_exp = n_ff, which an arch with
     * hparams_moe skips); hparams_moe after the widths' check and the router's defaults;
     * hparams at the end. Binding a layer: bind_attn in place of arch_attn.c's attention;
     * bind_layer after the layer's common tensors; bind_moe after a MoE layer's experts. */
    sl_status (*expert_widths)(struct sl_model *m, sl_error *err);
    sl_status (*hparams_moe)(struct sl_model *m, sl_error *err);
    sl_status (*hparams)(struct sl_model *m, sl_error *err);
    sl_status (*bind_attn)(struct sl_model *m, int il, sl_error *err);
    sl_status (*bind_layer)(struct sl_model *m, int il, sl_error *err);
    sl_status (*bind_moe)(struct sl_model *m, int il, sl_error *err);
} sl__arch_traits;

typedef struct sl__hparams {
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot;
    int32_t n_ff, n_ff_exp, n_ff_shexp, n_expert, n_expert_used;
    int32_t n_swa;          /* sliding window (gemma3, gpt-oss), 0: none */
    int32_t swa_period;     /* the file's pattern, else the arch's (traits.swa_period) */
    float rms_eps;
    float rope_base, rope_scale;            /* rope_scale = freq_scale = 1 / factor */
    float rope_base_swa, rope_scale_swa;    /* for sliding-window layers */
    float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    int32_t n_ctx_orig;
    bool longrope;          /* rope.scaling.type "longrope": rope_factors_long / _short instead
                               of rope_freqs (llama, granite; phi3 reads them always) */
    float attn_scale;       /* 0: 1/sqrt(head_dim) */
    float attn_softcap;     /* attention logits c tanh(l / c) (gemma2); 0: none */
    /* deepseek2 attention.temperature_scale / _length (Mistral Large 3): sl_attn_params'
     * temp_scale / temp_len; 0: none */
    float attn_temp_scale;
    int32_t attn_temp_len;
    float final_softcap;    /* output logits c tanh(l / c) (gemma2); 0: none */
    float embd_scale;       /* embeddings times this (gemma: sqrt(n_embd); granite's
                               embedding_scale); 0: none */
    float residual_scale;   /* each block's output times this before the residual add
                               (granite); 0: none */
    float logit_scale;      /* output logits divided by this (granite); 0: none */
    sl_moe_act act;         /* the dense FFN's activation: traits.act, or SL_MOE_RELU from
                               SL_FFN_ACT_KEY (arch.c) */
    /* router (the arch's traits, or the file's keys: deepseek2, glm4moe) */
    sl_gating gating;
    bool norm_topk;
    float expert_weights_scale;             /* 1: none */
    int32_t n_group, n_group_used;          /* group-limited top-k; n_group <= 1: none */
    /* MLA (deepseek2). The KV cache holds one latent "head" per token: head_dim = n_lora_kv +
     * n_rot (n_head_kv = 1), the normalised compressed KV then the roped key part; V is the
     * first n_lora_kv entries of that same row. q_lora_rank 0: plain attn_q. */
    int32_t n_lora_q, n_lora_kv, n_embd_head_k_mla, n_embd_head_v_mla;
    /* legacy file (no *_mla keys): blk.N.attn_kv_b instead of attn_k_b / attn_v_b, from which
     * the load derives both in F32 (sl_weight.derive) */
    bool mla_kv_b;
    int32_t n_dense_lead;                   /* layers [0, n_dense_lead) have a dense FFN */
    int32_t n_expert_shared;                /* shared experts, n_ff_exp wide each */
    float yarn_log_mul;                     /* rope.scaling.yarn_log_multiplier */
    /* nextn_predict_layers: the file's last blocks are multi-token-prediction blocks, not run
     * for next-token logits (llama.cpp's n_layer_nextn); n_layer counts the trunk only */
    int32_t n_layer_nextn;
    /* Gated DeltaNet (qwen3next, llama.cpp's ssm.* keys): d_conv conv taps, n_k_heads
     * (group_count) key heads and n_v_heads (time_step_rank) value heads of d_state each,
     * d_inner = n_v_heads * d_state; layer il is recurrent iff (il + 1) % full_attn_interval */
    int32_t ssm_d_conv, ssm_d_inner, ssm_d_state, ssm_n_group, ssm_dt_rank;
    bool ssm_qwen35;        /* Qwen3.5's DeltaNet: tiled key heads, split beta / alpha */
    int32_t full_attn_interval;
    /* floats per token the arch's own steps need in each of a side's q, att, k, v, g, u
     * buffers (ctx_dev.c sl__side_carve); 0: none */
    int64_t scratch_tok;
} sl__hparams;

/* Sluice's metadata key for a dense FFN's activation ("relu", "silu"; arch.c says why) */
#define SL_FFN_ACT_KEY "sluice.feed_forward_activation"

typedef struct sl__layer {
    sl_weight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *q_norm, *k_norm, *attn_post_norm;
    sl_weight *ffn_norm, *ffn_post_norm;
    sl_weight *ffn_gate, *ffn_up, *ffn_down;                 /* dense FFN; ffn_gate NULL:
                                                                ffn_up is gate | up (phi3) */
    sl_weight *ffn_gate_b, *ffn_up_b, *ffn_down_b;           /* dense FFN biases, or NULL
                                                                (llama, granite) */
    sl_weight *wqkv;        /* fused [n_embd, Q + 2 KV] = q | k | v rows, or NULL (any q/k/v
                               architecture: llama.cpp's create_tensor_qkv) */
    sl_weight *bqkv;        /* the fused one's bias [Q + 2 KV], or NULL (then bq, bk, bv) */
    sl_weight *gate_inp;                                     /* router [n_embd, n_expert] */
    sl_weight *gate_exps, *up_exps, *down_exps;              /* merged experts, or NULL */
    sl_weight **gate_e, **up_e, **down_e;                    /* per-expert tensors, or NULL */
    sl_weight *gate_shexp, *up_shexp, *down_shexp, *gate_inp_shexp;
    sl_weight *bo, *sinks;                                   /* gpt-oss attention */
    sl_weight *gate_inp_b, *gate_exps_b, *up_exps_b, *down_exps_b; /* gpt-oss MoE biases */
    /* deepseek2 MLA: q = Wq_b rms(Wq_a x) (or Wq x); [c_kv | k_pe] = Wkv_a x; per head h,
     * k_b[h] [nope -> n_lora_kv] absorbs into q, v_b[h] [n_lora_kv -> v] expands the output */
    sl_weight *wq_a, *q_a_norm, *wq_b, *wkv_a, *kv_a_norm, *wk_b, *wv_b;
    sl_weight *exp_probs_b;                                  /* selection bias, or NULL */
    /* qwen3next: attn_q rows per head are q | gate (output * sigmoid(gate)); a recurrent
     * (Gated DeltaNet) layer has ssm_out (also bound as wo: "the mixer's output") and the
     * rest below, and no q/k/v */
    bool attn_gated;
    sl_weight *ssm_qkv, *ssm_z, *ssm_conv1d, *ssm_dt, *ssm_a, *ssm_ba, *ssm_norm, *ssm_out;
    sl_weight *ssm_beta, *ssm_alpha; /* Qwen3.5: ssm_ba's two halves, per value head */
    bool swa;               /* sliding-window layer */
    sl_rope_params rope;
    /* hot/cold split of the dense FFN (HOT_COLD placement), else n_hot == 0 and NULL parts:
     * hot[3] (gate', up', down') in device blocks, cold[3] in host pool blocks, each an
     * sl_weight of the compact shape (scheduler/moe/ffn_split.h); split_granule[k] is granule k */
    int64_t n_hot;
    bool *split_granule;
    sl_weight split_hot[3], split_cold[3];
    /* the scheduler's view of the experts (pointers refreshed after loading) */
    const void **moe_gate, **moe_up, **moe_down;
    bool *moe_on_device;
    sl_moe_layer moe;
    /* hot/cold split of the routed experts (HOT_COLD with a MoE index), else NULL: then
     * n_hot counts the hot neurons of all experts, split_granule is [n_expert][n_ff_exp /
     * granule] (expert-major), split_hot / split_cold hold one side's packed gate', up', down'
     * blobs (scheduler/moe/ffn_split.h), the expert tensors are SL_RES_PARTS (their biases stay
     * whole on the host) and moe's expert pointers are NULL: parts replace it */
    struct sl__moe_split *moe_split;
} sl__layer;

/* One MoE layer's two sides (0 hot, on the device; 1 cold, on the host), each an
 * sl_moe_layer of per-expert widths over its blobs (refreshed with the other pointers).
 * Invariants: ff_at[s][0] == 0, non-decreasing, ff_at[0][X] + ff_at[1][X] == n_expert * n_ff;
 * part[s].gate[e] etc. point into split_hot / split_cold; only part[1] has the down bias
 * (scheduler/moe/ffn_split.h); the hot side's gate/up bias entries are in the device arena with
 * its parts (hot_b, so every executor reads them where it reads the hot matrices), the cold
 * side's in host memory. */
typedef struct sl__moe_split {
    sl_moe_layer part[2];
    int64_t *ff_at[2];        /* [n_expert + 1] */
    const void **ptr[2][3];   /* [n_expert]: part[s]'s gate, up, down */
    sl_weight hot_b[2];       /* F32 [ff_at[0][n_expert]]: the hot gate, up bias entries on the
                                 device (residency 0: the experts have no such bias) */
    float *cold_b[2];         /* [ff_at[1][n_expert]]: the cold gate, up bias entries, or NULL */
    bool *hot_on_device;      /* [n_expert]: part[0].on_device, each the hot blobs' residency
                               * (sl__model_refresh_pointers; the fetch scheduler reads them in
                               * place, and stats count their calls as device calls) */
} sl__moe_split;

struct sl_model {
    char *path;
    sl_gguf *gguf;
    sl_arch arch;
    const sl__arch_traits *tr;
    sl__hparams hp;
    sl_model_options opt;
    sl_place_plan plan;             /* where each of w[] lives (scheduler/policy/placement.h) */
    sl_place_tensor *place_t;       /* [n_w]: the plan's view of w[] */
    sl_weight *w;                   /* bound weights */
    size_t n_w;
    sl__layer *layers;              /* [n_layer] */
    sl_weight *tok_embd, *output_norm, *output, *rope_freqs;
    sl_weight *output_b;            /* output.bias (qwen2), or NULL */
    sl_weight *rope_long, *rope_short; /* LongRoPE factors, or NULL: sl__model_rope_factors */
    /* M-RoPE on text (sl__arch_mrope_text): per rotated pair 1, or FLT_MAX for the pairs
     * that take the fourth position component (0 for text: angle 0, as ggml's); NULL when
     * every pair rotates. mrope_w wraps it as the rope factors (sl__model_rope_factors). */
    float *mrope_ff;
    sl_weight mrope_w;
    sl_device *dev;
    sl_hostpool *hostpool;
    sl_bfc *arena;                  /* device arena (sim placements), or NULL */
    sl_stream *stream;
    sl_model_info info;
    sl_vocab *vocab;                /* NULL when the file has no tokenizer.ggml.model */
    char notice[256];               /* first loader notice (e.g. O_DIRECT fallback) */
    /* live reload (reload.c) */
    sl_swap_gate gate;
    bool gate_ready;
    /* decode graphs (forward.c): a capture records whatever is enqueued on `stream`, from any
     * thread, so one is taken only while the model has a single context: n_ctx_live counts
     * them, changed under ctx_mu, which a capture holds (a context being created waits for it);
     * atomic, so that a pass of one of several contexts reads it without the lock */
    pthread_mutex_t ctx_mu;
    bool ctx_mu_ready;
    atomic_int n_ctx_live;
    /* sl_model_close came while contexts were live (under ctx_mu): the last context's
     * sl_ctx_destroy closes the model (sl__model_free); no context may be created */
    bool close_pending;
    /* a prefill's streamed host experts (stream.h): one staging buffer per model, as every
     * context's passes are ordered on `stream`; a streamed layer's copies and compute are
     * enqueued under stream_mu, so no other context's copies come between them. Taken by the
     * first context that streams (stream_buf NULL until then; stream_failed: no room) */
    pthread_mutex_t stream_mu;
    bool stream_mu_ready, stream_failed; /* failed: retried at the next context's creation */
    atomic_bool stream_ready;       /* stream_buf is taken (read without the lock) */
    sl_block stream_block;
    uint8_t *stream_buf;
    uint64_t stream_bytes;
    /* the static hot experts its contexts share (hot.h; NULL: none), under hot_mu */
    pthread_mutex_t hot_mu;
    bool hot_mu_ready;
    struct sl__hot_shared *hot_shared;
    sl_swap_sources sources;        /* every shard's size and mtime as loaded */
    sl_gguf *file_view;             /* the files re-parsed after a reload, or NULL (file_view.c) */
    /* In a runtime (sl_model_open_in): dev, hostpool and arena are the runtime's (borrowed,
     * not destroyed by close); the rest is runtime.c's (sl__resident, runtime_impl.h). NULL
     * rt: private. */
    sl_runtime *rt;
    struct sl__resident *res;
    const struct sl__serving *serving; /* the serving table (sl__serving), NULL without rt */
};

/* Whether layer L has routed experts (a deepseek2 model's leading layers are dense). */
static inline bool sl__layer_moe(const sl__layer *L)
{
    return L->moe_gate != NULL;
}

/* Whether the model's device is a GPU (cuda), not the simulated one (or none). */
static inline bool sl__model_cuda(const sl_model *m)
{
    return sl_device_kind_get(m->dev) == SL_DEVICE_CUDA;
}

/* A host copy kept while its weight is on the device (runtime.c): a device weight of a model
 * in a runtime keeps its host floor, so eviction is a free and reload a pure H2D copy. */
typedef struct sl__floor {
    const void *data;               /* the host copy, NULL: none kept */
    sl_block h_block;               /* host pool block of it, or SL_BLOCK_NONE */
    void *h_owned;                  /* malloc'd converted copy, or NULL */
} sl__floor;

/* Fault injection of a live reload (base/fault.h's swap sites): a site's calls counted per
 * reload run, each asked of the installed hook. */
typedef struct sl__swap_fault {
    sl_fault_site site;
    uint64_t n;
} sl__swap_fault;

static inline bool sl__swap_fault_hit(sl__swap_fault *f)
{
    return f && sl__fault_hit(f->site, ++f->n);
}

/* The serving layer's part in a model's life. runtime/serve installs its table in the models
 * it opens (sl_model_open_in); a private model has none (NULL). The engine reaches serving only
 * through it, so the loader never names serving. Every entry takes a model of a runtime.
 * - floor_keep: to_device's hand-off: keeps w's host copy as its floor (instead of freeing it).
 * - floor_shared_data: w's bytes in the model's shared host floor, or NULL (load as usual).
 * - load_floor: the model's host floor: attaches its shared region first when the runtime
 *   shares floors, then loads every weight's host copy (sl__model_load_weights).
 * - Open hooks, in order: lend (instead of opening a device: the runtime's device, arena and
 *   host pool; *device_free = the arena; vram_budget 0 becomes the arena), attach (after the
 *   plan: residency records; hot-cold refused), register (after the load: in the runtime's
 *   list, at HOST).
 * - Live reload (reload.c), between lock and unlock (the runtime's mutex: no residency change
 *   meanwhile; taken after the swap gate, as evaluations do): swap_weight makes ns (a host
 *   copy of the new bytes, type and size) w's host floor and, when the plan put w on the
 *   device and the model is there, copies it there (the same block when the size is the same,
 *   else a new one); a device with no room for it (or the fault) leaves w on the host with the
 *   new bytes when may_fall (*fell, w->fallback, and the model's device bytes no longer count
 *   it), else returns SL_ERR_NOMEM with w unchanged. On success ns belongs to the model; the
 *   weight's previous host copy is freed unless it lies in a shared floor (copy-on-write).
 *   SL_ERR_UNSUPPORTED for a model on DISK. weight_to_host moves a device weight to its floor
 *   as a fallback (a sibling's); weight_to_device returns a fallen-back weight of a model on
 *   the device to a new block (*ok false: no room, nothing changed). provenance_moved: a
 *   reload moved w's provenance to the new file version without swapping its bytes; the
 *   model's files are re-parsed before it next loads from disk. host_copy: the host copy of
 *   w's bytes (its floor while on the device), NULL on DISK; takes the runtime's mutex itself;
 *   those bytes stay where they are until the model's next reload or release to DISK, so a
 *   reload (which holds the gate's reload lock) may read them after it returns.
 * - eval_begin / eval_end bracket an evaluation of a context: begin fails with
 *   SL_ERR_NOT_RESIDENT below DEVICE, marks the model busy (never evicted or moved until end)
 *   and returns its residency epochs, which engine.c compares with the context's to refresh or
 *   rebind it once with the swap gate's epoch.
 * - detach: a closing model's device weights and floors freed; close calls it first. */
typedef struct sl__serving {
    bool (*floor_keep)(sl_model *m, sl_weight *w);
    const void *(*floor_shared_data)(const sl_model *m, const sl_weight *w);
    sl_status (*load_floor)(sl_model *m, sl_error *err);
    sl_status (*lend)(sl_model *m, uint64_t *device_free, sl_error *err);
    sl_status (*attach)(sl_model *m, sl_error *err);
    sl_status (*register_model)(sl_model *m, sl_error *err);
    void (*lock)(sl_model *m);
    void (*unlock)(sl_model *m);
    sl_status (*swap_weight)(sl_model *m, sl_weight *w, const sl__floor *ns, uint32_t type,
                             uint64_t nbytes, bool may_fall, sl__swap_fault *fault, bool *fell,
                             sl_error *err);
    sl_status (*weight_to_host)(sl_model *m, sl_weight *w, sl_error *err);
    sl_status (*weight_to_device)(sl_model *m, sl_weight *w, bool *ok, sl_error *err);
    void (*provenance_moved)(sl_model *m);
    const void *(*host_copy)(sl_model *m, const sl_weight *w);
    sl_status (*eval_begin)(sl_ctx *c, uint64_t *res_epoch, uint64_t *layout_epoch,
                            sl_error *err);
    void (*eval_end)(sl_ctx *c);
    void (*detach)(sl_model *m);
} sl__serving;

/* Whether loading should stop at the host copies (a runtime's host floor). */
static inline bool sl__load_host_only(const sl_model *m)
{
    return m->res != NULL;
}

/* w's bytes in m's shared host floor, or NULL (none: load as usual). */
static inline const void *sl__floor_shared_data(const sl_model *m, const sl_weight *w)
{
    return m->serving ? m->serving->floor_shared_data(m, w) : NULL;
}

/* model.c: sl_model_open's body; serving (with rt) opens a model of a runtime. */
sl_status sl__model_open(sl_runtime *rt, const sl__serving *serving, const char *path,
                         const sl_model_options *opt, sl_model **out, sl_error *err);

/* file_view.c */
/* The handle w->t of every weight lies in: m->file_view, or m->gguf before any refresh. */
const sl_gguf *sl__model_file(const sl_model *m);
/* Refreshing the view, so that a load from the files reads what a live reload left in the
 * weights, in two steps: parse reads m's files again into *fresh (the file I/O; it reads only
 * what a reload writes: path, sources, provenance, the current view), SL_ERR_UNSUPPORTED when
 * the files changed since the last reload or a tensor's change was refused, SL_ERR_IO when they
 * do not parse; bind (cheap, no failure) makes fresh the view and binds every weight's t there,
 * *old: the previous view (NULL: none), which the caller closes once the weights no longer
 * point into it (io = mmap). */
sl_status sl__model_files_parse(const sl_model *m, sl_gguf **fresh, sl_error *err);
void sl__model_files_bind(sl_model *m, sl_gguf *fresh, sl_gguf **old);

/* arch.c */
const sl__arch_traits *sl__arch_traits_get(sl_arch a);
/* Reads hyperparameters (llama.cpp's key names, "{arch}.…") into m->hp; errors name the key. */
sl_status sl__hparams_load(sl_model *m, sl_error *err);
/* Binds every tensor of the architecture into m->w / m->layers / the globals, with shape checks;
 * a tensor of the file that the architecture does not use is SL_ERR_FORMAT naming it (llama.cpp:
 * "wrong number of tensors"). */
sl_status sl__model_bind(sl_model *m, sl_error *err);
/* The rope frequency factors a context of n_ctx positions applies, as llama.cpp's
 * get_rope_factors: rope_freqs, else LongRoPE's long factors when n_ctx > the original context
 * length (rope.scaling.original_context_length), else its short ones; NULL: none. */
const sl_weight *sl__model_rope_factors(const sl_model *m, int32_t n_ctx);

/* model.c: m->info from the weights' current residency and sizes. */
void sl__model_info_fill(sl_model *m);

/* weight.c */
/* The placement plan of the bound weights (m->plan, m->place_t; want_device set from it).
 * device_free: free device memory (0: no device); cuda: the device is CUDA (types without a
 * CUDA GEMV keep their group on the host). */
sl_status sl__model_plan(sl_model *m, uint64_t device_free, bool cuda, sl_error *err);
/* Device bytes a context will need besides the weights (KV cache, buffers), for the budget. */
uint64_t sl__model_reserve_bytes(const sl_model *m);
/* Of those, the prefill's staging buffer (cuda, a layer's host experts streamed through it):
 * needed only by a placement that leaves a device layer's routed experts on the host. */
uint64_t sl__model_stream_reserve_bytes(const sl_model *m);
/* Reads/converts/copies every bound weight to where the plan put it. */
sl_status sl__model_load_weights(sl_model *m, sl_error *err);
/* Checks the invariants above and scheduler/weights.h's (residency vs data/blocks, data inside its host
 * block, type changes only by conversion, expert pointers); SL_ERR_INVALID naming the weight.
 * Run at the end of every open (cost O(weights + layers * experts)). */
sl_status sl__model_validate(const sl_model *m, sl_error *err);
/* Points the scheduler's expert arrays, the layers' sl_moe_layer (types, on_device) and the
 * rope factors at the weights' current data (after loading, and after a live reload). */
sl_status sl__model_refresh_pointers(sl_model *m, sl_error *err);
/* Reads tensor t of g into a new host pool block (*block), O_DIRECT when direct (else pread);
 * *data is where its first byte landed. */
sl_status sl__weight_read(sl_model *m, const sl_gguf *g, const sl_gguf_tensor *t, bool direct,
                          sl_block *block, void **data, sl_error *err);
/* Dequantizes src (w's shape, file_type) into a new malloc'd F32 array *out. */
sl_status sl__weight_dequant_f32(const sl_weight *w, uint32_t file_type, const void *src,
                                 float **out, sl_error *err);
/* Copies w's host bytes into a new device block of the arena (SL_BFC_PINNED; synchronous),
 * frees the host copy (pool block or owned buffer) or keeps it as a runtime's host floor
 * (sl__floor_keep), and makes w device-resident. */
sl_status sl__weight_to_device(sl_model *m, sl_weight *w, sl_error *err);
/* Live reload of a hot/cold split layer (reload.c): rebuilds L's compact hot (device) and
 * cold (host) parts from new host bytes of its whole gate/up/down (data[p], type[p],
 * nbytes[p]; borrowed, p = 0 gate, 1 up, 2 down; down's granule must be the split's) with the
 * same hot granules, then frees the old parts and makes the three weights' records say the
 * new types. On failure (SL_ERR_NOMEM: no room for the new parts beside the old) L is as it
 * was. */
sl_status sl__weight_resplit(sl_model *m, sl__layer *L, const void *const data[3],
                             const uint32_t type[3], const uint64_t nbytes[3],
                             const bool converted[3], sl_error *err);
/* How many CPU threads m's contexts compute with and which node they bind to
 * (runtime/engine/cpu_threads.h's rule on m's options, placement and the CPUs of the node
 * its host pool is bound to; threads.c). */
sl__cpu_plan sl__model_cpu_plan(const sl_model *m);
/* The CPU kernels' thread pool of m (sl__model_cpu_plan; cpus): one per context (engine.c),
 * and the load's repack pass while it runs (repack.c).
 * *out is NULL, and nothing runs, for one unbound thread: the caller does everything. */
sl_status sl__model_cpu_pool_create(const sl_model *m, sl_cpu_pool **out, sl_error *err);
/* Frees the blocks and buffer of s (NULL data, no blocks afterwards). */
void sl__weight_storage_release(sl_model *m, sl_weight_storage *s);
/* Frees every weight's memory (host pool, converted copies, device blocks). */
void sl__model_free_weights(sl_model *m);
/* sl_model_close's work, once no context is live. */
void sl__model_free(sl_model *m);
/* Pointer to expert e's 2-D matrix of a layer's projection (0 gate, 1 up, 2 down). */
const void *sl__expert_data(const sl__layer *L, int proj, int32_t e);

#endif
