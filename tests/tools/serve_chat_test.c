/* Chat template families of `sluice serve` (tools/serve/serve_chat.h) against llama.cpp
 * 0c1e570's llm_chat_detect_template / llm_chat_apply_template (src/llama-chat.cpp).
 *
 * Formatting: for each family added after the first set (and granite, whose assistant cue and
 * tool calls were fixed; gemma's role literally named "model"), the exact output for
 * llama.cpp's test conversation (tests/test-chat-template.cpp) with and without the
 * generation prompt, and for a conversation
 * of every role class (tool, function, roles no family names, a late system message), where
 * llama.cpp's code skips a role or falls through to another. The strings marked
 * "= test-chat-template.cpp" equal that file's expected_output; every string here was produced
 * by llama.cpp itself: llama_chat_apply_template of the CPU build of 0c1e570 (libllama.a,
 * .peer/build-0.3.36-cpu) called from a small C++ driver with the family's name as template
 * (dots1, which llama.cpp does not name: its telltale <|endofuserprompt|>).
 * The same driver compared Sluice with llama.cpp (detected family and output) on 209
 * templates (every family name, telltale mixtures, all of models/templates and
 * test-chat-template.cpp) x 14 conversations x add_ass, and on every family with 220k random
 * conversations (random roles, whitespace, empty chats): no difference.
 *
 * Detection: telltale snippets of every family and mixtures that pin llama.cpp's order (an
 * earlier family's telltale still wins over a new one's), each checked against llama.cpp's
 * detection; and, given a directory (llama.cpp's models/templates: the models' own templates,
 * not copied here), the real sources of k_files:
 *   serve_chat_test .peer/llama-cpp-python-0.3.36/vendor/llama.cpp/models/templates
 * Uses only the public functions, so it also builds against older serve_chat.c files. */
#include <stdlib.h>
#include <string.h>

#include "tests/testing.h"
#include "tools/serve/serve_chat.h"

#define M(role, text) {role, text, sizeof text - 1}

/* llama.cpp's test conversation (tests/test-chat-template.cpp) */
#define STD_CONV                                                                             \
    M("system", "You are a helpful assistant"), M("user", "Hello"), M("assistant", "Hi there"), \
        M("user", "Who are you"), M("assistant", "   I am an assistant   "),                    \
        M("user", "Another question")
static const sl_chat_msg k_std[] = {STD_CONV};
/* test-chat-template.cpp's granite extra_conversation: 3.x's, then 4.x's */
static const sl_chat_msg k_granite3_calls[] = {
    STD_CONV, M("user", "What is the weather?"),
    M("assistant_tool_call",
      "[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]"),
    M("tool_response", "{\"temperature\": 72}")};
static const sl_chat_msg k_granite4_calls[] = {
    STD_CONV, M("user", "What is the weather?"),
    M("assistant_tool_call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                             "{\"location\": \"NYC\"}}\n</tool_call>"),
    M("tool_response", "{\"temperature\": 72}")};
/* every role class, the chat opening without a system message and ending with one */
static const sl_chat_msg k_roles[] = {
    M("user", "u"),        M("tool", "t"), M("function", "f"), M("ipython", "i"),
    M("assistant_tool_call", "c"), M("assistant", " a "), M("system", " s ")};
/* gemma: a role literally named "model" takes no pending system message */
static const sl_chat_msg k_gemma_model[] = {M("system", "s"), M("model", "m"), M("user", "u")};

#define CONV(a) a, sizeof a / sizeof *a

typedef struct apply_case {
    const char *family; /* sl_chat_name's */
    const sl_chat_msg *msgs;
    size_t n;
    bool add_ass;
    const char *want;
} apply_case;

static const apply_case k_apply[] = {
    {"monarch", CONV(k_std), true, /* = test-chat-template.cpp */
     "system\nYou are a helpful assistant</s>\n"
     "<s>user\nHello</s>\n<s>assistant\n"
     "Hi there</s>\n<s>user\nWho are you</s>\n"
     "<s>assistant\n   I am an assistant   </s>\n"
     "<s>user\nAnother question</s>\n"
     "<s>assistant\n"},
    {"monarch", CONV(k_std), false,
     "system\nYou are a helpful assistant</s>\n"
     "<s>user\nHello</s>\n<s>assistant\n"
     "Hi there</s>\n<s>user\nWho are you</s>\n"
     "<s>assistant\n   I am an assistant   </s>\n"
     "<s>user\nAnother question</s>\n"},
    {"monarch", CONV(k_roles), false,
     "user\nu</s>\n<s>tool\nt</s>\n<s>function\n"
     "f</s>\n<s>ipython\ni</s>\n<s>assistant_tool_call\n"
     "c</s>\n<s>assistant\n a </s>\n<s>system\n"
     " s </s>\n"},
    {"orion", CONV(k_std), true, /* = test-chat-template.cpp */
     "Human: You are a helpful assistant\n"
     "\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n"
     "\nAssistant: </s>   I am an assistant   </s>Human: Another question\n"
     "\nAssistant: </s>"},
    {"orion", CONV(k_std), false,
     "Human: You are a helpful assistant\n"
     "\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n"
     "\nAssistant: </s>   I am an assistant   </s>Human: Another question\n"
     "\nAssistant: </s>"},
    {"orion", CONV(k_roles), false,
     "Human: u\n\nAssistant: </s>t</s>f</s>i</s>c</s> a </s>"},
    {"deepseek-ocr", CONV(k_std), true,
     "You are a helpful assistantHelloHi thereWho are you   I am an assistant   Another question"},
    {"deepseek-ocr", CONV(k_std), false,
     "You are a helpful assistantHelloHi thereWho are you   I am an assistant   Another question"},
    {"deepseek-ocr", CONV(k_roles), false,
     "utfic a  s "},
    {"minicpm", CONV(k_std), true, /* = test-chat-template.cpp */
     "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an "
     "assistant<用户>Another question<AI>"},
    {"minicpm", CONV(k_std), false,
     "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an "
     "assistant<用户>Another question<AI>"},
    {"minicpm", CONV(k_roles), false,
     "<用户>u<AI>tficas"},
    {"exaone4", CONV(k_std), true,
     "[|system|]You are a helpful assistant[|endofturn|]\n"
     "[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n"
     "[|user|]Who are you\n[|assistant|]I am an assistant[|endofturn|]\n"
     "[|user|]Another question\n[|assistant|]"},
    {"exaone4", CONV(k_std), false,
     "[|system|]You are a helpful assistant[|endofturn|]\n"
     "[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n"
     "[|user|]Who are you\n[|assistant|]I am an assistant[|endofturn|]\n"
     "[|user|]Another question\n"},
    {"exaone4", CONV(k_roles), false,
     "[|user|]u\n[|tool|]t[|endofturn|]\n"
     "[|assistant|]a[|endofturn|]\n[|system|]s[|endofturn|]\n"},
    {"exaone-moe", CONV(k_std), true,
     "<|system|>\nYou are a helpful assistant<|endofturn|>\n"
     "<|user|>\nHello<|endofturn|>\n<|assistant|>\n"
     "Hi there<|endofturn|>\n<|user|>\n"
     "Who are you<|endofturn|>\n<|assistant|>\n"
     "I am an assistant<|endofturn|>\n"
     "<|user|>\nAnother question<|endofturn|>\n"
     "<|assistant|>\n"},
    {"exaone-moe", CONV(k_std), false,
     "<|system|>\nYou are a helpful assistant<|endofturn|>\n"
     "<|user|>\nHello<|endofturn|>\n<|assistant|>\n"
     "Hi there<|endofturn|>\n<|user|>\n"
     "Who are you<|endofturn|>\n<|assistant|>\n"
     "I am an assistant<|endofturn|>\n"
     "<|user|>\nAnother question<|endofturn|>\n"},
    {"exaone-moe", CONV(k_roles), false,
     "<|user|>\nu<|endofturn|>\n<|tool|>\n"
     "t<|endofturn|>\n<|assistant|>\n"
     "a<|endofturn|>\n<|system|>\ns<|endofturn|>\n"},
    {"rwkv-world", CONV(k_std), true,
     "System: You are a helpful assistant\n"
     "\nUser: Hello\n\nAssistant: Hi there\n"
     "\nUser: Who are you\n\nAssistant: I am an assistant\n"
     "\nUser: Another question\n\nAssistant:"},
    {"rwkv-world", CONV(k_std), false,
     "System: You are a helpful assistant\n"
     "\nUser: Hello\n\nAssistant: Hi there\n"
     "\nUser: Who are you\n\nAssistant: I am an assistant\n"
     "\nUser: Another question\n\nAssistant:"},
    {"rwkv-world", CONV(k_roles), false,
     "User: u\n\nAssistant: a\n\nSystem: s\n"
     "\n"},
    {"granite", CONV(k_std), true,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite", CONV(k_std), false,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"},
    {"granite", CONV(k_roles), false,
     "<|start_of_role|>user<|end_of_role|>u<|end_of_text|>\n"
     "<|start_of_role|>tool<|end_of_role|>t<|end_of_text|>\n"
     "<|start_of_role|>function<|end_of_role|>f<|end_of_text|>\n"
     "<|start_of_role|>ipython<|end_of_role|>i<|end_of_text|>\n"
     "<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>c<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|> a <|end_of_text|>\n"
     "<|start_of_role|>system<|end_of_role|> s <|end_of_text|>\n"},
    {"granite", CONV(k_granite3_calls), true, /* = test-chat-template.cpp */
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
     "<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": "
     "\"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]<|end_of_text|>\n"
     "<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite", CONV(k_granite3_calls), false,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
     "<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": "
     "\"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]<|end_of_text|>\n"
     "<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n"},
    {"granite-4.0", CONV(k_std), true,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.0", CONV(k_std), false,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"},
    {"granite-4.0", CONV(k_roles), false,
     "<|start_of_role|>user<|end_of_role|>u<|end_of_text|>\n"
     "<|start_of_role|>tool<|end_of_role|>t<|end_of_text|>\n"
     "<|start_of_role|>function<|end_of_role|>f<|end_of_text|>\n"
     "<|start_of_role|>ipython<|end_of_role|>i<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|><|tool_call|>c<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|> a <|end_of_text|>\n"
     "<|start_of_role|>system<|end_of_role|> s <|end_of_text|>\n"},
    {"granite-4.0", CONV(k_granite4_calls), true, /* = test-chat-template.cpp */
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n"
     "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n"
     "</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>"
     "{\"temperature\": 72}<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.0", CONV(k_granite4_calls), false,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n"
     "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n"
     "</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>"
     "{\"temperature\": 72}<|end_of_text|>\n"},
    {"granite-4.1", CONV(k_std), true,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.1", CONV(k_std), false,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"},
    {"granite-4.1", CONV(k_roles), false,
     "<|start_of_role|>user<|end_of_role|>u<|end_of_text|>\n"
     "<|start_of_role|>tool<|end_of_role|>t<|end_of_text|>\n"
     "<|start_of_role|>function<|end_of_role|>f<|end_of_text|>\n"
     "<|start_of_role|>ipython<|end_of_role|>i<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|><|tool_call|>c<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|> a <|end_of_text|>\n"
     "<|start_of_role|>system<|end_of_role|> s <|end_of_text|>\n"},
    {"granite-4.1", CONV(k_granite4_calls), true, /* = test-chat-template.cpp */
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n"
     "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n"
     "</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>"
     "{\"temperature\": 72}<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.1", CONV(k_granite4_calls), false,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n"
     "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n"
     "</tool_call><|end_of_text|>\n<|start_of_role|>tool_response<|end_of_role|>"
     "{\"temperature\": 72}<|end_of_text|>\n"},
    {"gigachat", CONV(k_std), true, /* = test-chat-template.cpp */
     "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available "
     "functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>"
     "user<|role_sep|>Who are you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"
     "assistant<|role_sep|>   I am an assistant   <|message_sep|>user<|role_sep|>Another "
     "question<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"
     "assistant<|role_sep|>"},
    {"gigachat", CONV(k_std), false,
     "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available "
     "functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>"
     "user<|role_sep|>Who are you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"
     "assistant<|role_sep|>   I am an assistant   <|message_sep|>user<|role_sep|>Another "
     "question<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"},
    {"gigachat", CONV(k_roles), false,
     "<s>user<|role_sep|>u<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"
     "assistant<|role_sep|> a <|message_sep|>"},
    {"yandex", CONV(k_std), true, /* = test-chat-template.cpp */
     " Пользователь: Hello\n\n Ассистент: Hi there\n"
     "\n Пользователь: Who are you\n\n"
     " Ассистент:    I am an assistant   \n"
     "\n Пользователь: Another question\n"
     "\n Ассистент:[SEP]"},
    {"yandex", CONV(k_std), false,
     " Пользователь: Hello\n\n Ассистент: Hi there\n"
     "\n Пользователь: Who are you\n\n"
     " Ассистент:    I am an assistant   \n"
     "\n Пользователь: Another question\n"
     "\n"},
    {"yandex", CONV(k_roles), false,
     " Пользователь: u\n\n Ассистент:  a \n"
     "\n"},
    {"bailing", CONV(k_std), true, /* = test-chat-template.cpp */
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>"
     "Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>"
     "HUMAN</role>Another question<role>ASSISTANT</role>"},
    {"bailing", CONV(k_std), false,
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>"
     "Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>"
     "HUMAN</role>Another question"},
    {"bailing", CONV(k_roles), false,
     "<role>HUMAN</role>u<role>TOOL</role>t<role>FUNCTION</role>f<role>IPYTHON</role>i<role>"
     "ASSISTANT_TOOL_CALL</role>c<role>ASSISTANT</role> a <role>SYSTEM</role> s "},
    {"bailing-think", CONV(k_std), true,
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>"
     "Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>"
     "HUMAN</role>Another question<role>ASSISTANT</role><think>"},
    {"bailing-think", CONV(k_std), false,
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>"
     "Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>"
     "HUMAN</role>Another question"},
    {"bailing-think", CONV(k_roles), false,
     "<role>HUMAN</role>u<role>TOOL</role>t<role>FUNCTION</role>f<role>IPYTHON</role>i<role>"
     "ASSISTANT_TOOL_CALL</role>c<role>ASSISTANT</role> a <role>SYSTEM</role> s "},
    {"bailing2", CONV(k_std), true,
     "<role>SYSTEM</role>You are a helpful assistant<|role_end|><role>HUMAN</role>"
     "Hello<|role_end|><role>ASSISTANT</role>Hi there<|role_end|><role>HUMAN</role>Who are "
     "you<|role_end|><role>ASSISTANT</role>   I am an assistant   <|role_end|><role>HUMAN</role>"
     "Another question<|role_end|><role>ASSISTANT</role>"},
    {"bailing2", CONV(k_std), false,
     "<role>SYSTEM</role>You are a helpful assistant<|role_end|><role>HUMAN</role>"
     "Hello<|role_end|><role>ASSISTANT</role>Hi there<|role_end|><role>HUMAN</role>Who are "
     "you<|role_end|><role>ASSISTANT</role>   I am an assistant   <|role_end|><role>HUMAN</role>"
     "Another question<|role_end|>"},
    {"bailing2", CONV(k_roles), false,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>u<|role_end|><role>"
     "TOOL</role>t<|role_end|><role>FUNCTION</role>f<|role_end|><role>IPYTHON</role>i<|role_end|>"
     "<role>ASSISTANT_TOOL_CALL</role>c<|role_end|><role>ASSISTANT</role> a <|role_end|><role>"
     "SYSTEM</role> s <|role_end|>"},
    {"smolvlm", CONV(k_std), true,
     "<|im_start|>You are a helpful assistant\n"
     "\nUser: Hello<end_of_utterance>\n"
     "Assistant: Hi there<end_of_utterance>\n"
     "User: Who are you<end_of_utterance>\n"
     "Assistant:    I am an assistant   <end_of_utterance>\n"
     "User: Another question<end_of_utterance>\n"
     "Assistant:"},
    {"smolvlm", CONV(k_std), false,
     "<|im_start|>You are a helpful assistant\n"
     "\nUser: Hello<end_of_utterance>\n"
     "Assistant: Hi there<end_of_utterance>\n"
     "User: Who are you<end_of_utterance>\n"
     "Assistant:    I am an assistant   <end_of_utterance>\n"
     "User: Another question<end_of_utterance>\n"},
    {"smolvlm", CONV(k_roles), false,
     "<|im_start|>User: u<end_of_utterance>\n"
     "Assistant: t<end_of_utterance>\n"
     "Assistant: f<end_of_utterance>\n"
     "Assistant: i<end_of_utterance>\n"
     "Assistant: c<end_of_utterance>\n"
     "Assistant:  a <end_of_utterance>\n"
     " s \n\n"},
    {"hunyuan-moe", CONV(k_std), true,
     "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|extra_0|>Hi "
     "there<|eos|><|startoftext|>Who are you<|extra_0|>   I am an assistant   <|eos|>"
     "<|startoftext|>Another question<|extra_0|>"},
    {"hunyuan-moe", CONV(k_std), false,
     "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|extra_0|>Hi "
     "there<|eos|><|startoftext|>Who are you<|extra_0|>   I am an assistant   <|eos|>"
     "<|startoftext|>Another question<|extra_0|>"},
    {"hunyuan-moe", CONV(k_roles), false,
     "<|startoftext|>u<|extra_0|><|startoftext|>t<|extra_0|><|startoftext|>f<|extra_0|>"
     "<|startoftext|>i<|extra_0|><|startoftext|>c<|extra_0|> a <|eos|><|startoftext|> s "
     "<|extra_4|>"},
    {"gpt-oss", CONV(k_std), true,
     "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>"
     "Hello<|end|><|start|>assistant<|message|>Hi there<|return|><|start|>user<|message|>Who are "
     "you<|end|><|start|>assistant<|message|>   I am an assistant   <|return|><|start|>"
     "user<|message|>Another question<|end|><|start|>assistant"},
    {"gpt-oss", CONV(k_std), false,
     "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>"
     "Hello<|end|><|start|>assistant<|message|>Hi there<|return|><|start|>user<|message|>Who are "
     "you<|end|><|start|>assistant<|message|>   I am an assistant   <|return|><|start|>"
     "user<|message|>Another question<|end|>"},
    {"gpt-oss", CONV(k_roles), false,
     "<|start|>user<|message|>u<|end|><|start|>tool<|message|>t<|end|><|start|>"
     "function<|message|>f<|end|><|start|>ipython<|message|>i<|end|><|start|>"
     "assistant_tool_call<|message|>c<|end|><|start|>assistant<|message|> a <|return|><|start|>"
     "system<|message|> s <|end|>"},
    {"hunyuan-dense", CONV(k_std), true,
     "You are a helpful assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜>"
     "<｜hy_Assistant｜>Hi there<｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are "
     "you<｜hy_Assistant｜><｜hy_Assistant｜>   I am an assistant   <｜hy_place▁holder▁no▁2｜>"
     "<｜hy_User｜>Another question<｜hy_Assistant｜>"},
    {"hunyuan-dense", CONV(k_std), false,
     "You are a helpful assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜>"
     "<｜hy_Assistant｜>Hi there<｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are "
     "you<｜hy_Assistant｜><｜hy_Assistant｜>   I am an assistant   <｜hy_place▁holder▁no▁2｜>"
     "<｜hy_User｜>Another question<｜hy_Assistant｜>"},
    {"hunyuan-dense", CONV(k_roles), false,
     "<｜hy_User｜>u<｜hy_Assistant｜><｜hy_Assistant｜> a <｜hy_place▁holder▁no▁2｜>"},
    {"hunyuan-vl", CONV(k_std), true,
     "<｜hy_begin▁of▁sentence｜>You are a helpful assistant<｜hy_place▁holder▁no▁3｜>"
     "Hello<｜hy_User｜>Hi there<｜hy_Assistant｜>Who are you<｜hy_User｜>   I am an assistant   "
     "<｜hy_Assistant｜>Another question<｜hy_User｜>"},
    {"hunyuan-vl", CONV(k_std), false,
     "<｜hy_begin▁of▁sentence｜>You are a helpful assistant<｜hy_place▁holder▁no▁3｜>"
     "Hello<｜hy_User｜>Hi there<｜hy_Assistant｜>Who are you<｜hy_User｜>   I am an assistant   "
     "<｜hy_Assistant｜>Another question<｜hy_User｜>"},
    {"hunyuan-vl", CONV(k_roles), false,
     "<｜hy_begin▁of▁sentence｜>u<｜hy_User｜> a <｜hy_Assistant｜>"},
    {"kimi-k2", CONV(k_std), true,
     "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>"
     "user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|>Hi there<|im_end|>"
     "<|im_user|>user<|im_middle|>Who are you<|im_end|><|im_assistant|>assistant<|im_middle|>   "
     "I am an assistant   <|im_end|><|im_user|>user<|im_middle|>Another question<|im_end|>"
     "<|im_assistant|>assistant<|im_middle|>"},
    {"kimi-k2", CONV(k_std), false,
     "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>"
     "user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|>Hi there<|im_end|>"
     "<|im_user|>user<|im_middle|>Who are you<|im_end|><|im_assistant|>assistant<|im_middle|>   "
     "I am an assistant   <|im_end|><|im_user|>user<|im_middle|>Another question<|im_end|>"},
    {"kimi-k2", CONV(k_roles), false,
     "<|im_user|>user<|im_middle|>u<|im_end|><|im_system|>tool<|im_middle|>t<|im_end|>f<|im_end|>"
     "i<|im_end|>c<|im_end|><|im_assistant|>assistant<|im_middle|> a <|im_end|><|im_system|>"
     "system<|im_middle|> s <|im_end|>"},
    {"seed_oss", CONV(k_std), true, /* = test-chat-template.cpp */
     "<seed:bos>system\nYou are a helpful assistant<seed:eos><seed:bos>user\n"
     "Hello<seed:eos><seed:bos>assistant\n"
     "Hi there<seed:eos><seed:bos>user\n"
     "Who are you<seed:eos><seed:bos>assistant\n"
     "I am an assistant<seed:eos><seed:bos>user\n"
     "Another question<seed:eos><seed:bos>assistant\n"},
    {"seed_oss", CONV(k_std), false,
     "<seed:bos>system\nYou are a helpful assistant<seed:eos><seed:bos>user\n"
     "Hello<seed:eos><seed:bos>assistant\n"
     "Hi there<seed:eos><seed:bos>user\n"
     "Who are you<seed:eos><seed:bos>assistant\n"
     "I am an assistant<seed:eos><seed:bos>user\n"
     "Another question<seed:eos>"},
    {"seed_oss", CONV(k_roles), false,
     "<seed:bos>user\nu<seed:eos><seed:bos>tool\n"
     "t<seed:eos><seed:bos>function\n"
     "f<seed:eos><seed:bos>ipython\ni<seed:eos><seed:bos>assistant_tool_call\n"
     "c<seed:eos><seed:bos>assistant\n"
     "a<seed:eos><seed:bos>system\n s <seed:eos>"},
    {"grok-2", CONV(k_std), true,
     "System: You are a helpful assistant<|separator|>\n"
     "\nHuman: Hello<|separator|>\n\n"
     "Assistant: Hi there<|separator|>\n"
     "\nHuman: Who are you<|separator|>\n"
     "\nAssistant:    I am an assistant   <|separator|>\n"
     "\nHuman: Another question<|separator|>\n"
     "\nAssistant:"},
    {"grok-2", CONV(k_std), false,
     "System: You are a helpful assistant<|separator|>\n"
     "\nHuman: Hello<|separator|>\n\n"
     "Assistant: Hi there<|separator|>\n"
     "\nHuman: Who are you<|separator|>\n"
     "\nAssistant:    I am an assistant   <|separator|>\n"
     "\nHuman: Another question<|separator|>\n"
     "\n"},
    {"grok-2", CONV(k_roles), false,
     "Human: u<|separator|>\n\nAssistant:  a <|separator|>\n"
     "\nSystem: s<|separator|>\n\n"},
    {"pangu-embedded", CONV(k_std), true,
     "[unused9]系统：You are a helpful assistant[unused10][unused9]用户：Hello[unused10][unused9]"
     "助手：Hi there[unused10][unused9]用户：Who are you[unused10][unused9]助手：   I am an "
     "assistant   [unused10][unused9]用户：Another question[unused10][unused9]助手："},
    {"pangu-embedded", CONV(k_std), false,
     "[unused9]系统：You are a helpful assistant[unused10][unused9]用户：Hello[unused10][unused9]"
     "助手：Hi there[unused10][unused9]用户：Who are you[unused10][unused9]助手：   I am an "
     "assistant   [unused10][unused9]用户：Another question[unused10]"},
    {"pangu-embedded", CONV(k_roles), false,
     "[unused9]系统：[unused10][unused9]用户：u[unused10][unused9]工具：t[unused10][unused9]方法"
     "：f[unused10][unused9]助手： a [unused10][unused9]系统： s [unused10]"},
    {"solar-open", CONV(k_std), true,
     "<|begin|>system<|content|>You are a helpful assistant<|end|><|begin|>user<|content|>"
     "Hello<|end|><|begin|>assistant<|content|>Hi there<|end|><|begin|>user<|content|>Who are "
     "you<|end|><|begin|>assistant<|content|>   I am an assistant   <|end|><|begin|>"
     "user<|content|>Another question<|end|><|begin|>assistant"},
    {"solar-open", CONV(k_std), false,
     "<|begin|>system<|content|>You are a helpful assistant<|end|><|begin|>user<|content|>"
     "Hello<|end|><|begin|>assistant<|content|>Hi there<|end|><|begin|>user<|content|>Who are "
     "you<|end|><|begin|>assistant<|content|>   I am an assistant   <|end|><|begin|>"
     "user<|content|>Another question<|end|>"},
    {"solar-open", CONV(k_roles), false,
     "<|begin|>user<|content|>u<|end|><|begin|>tool<|content|>t<|end|><|begin|>"
     "function<|content|>f<|end|><|begin|>ipython<|content|>i<|end|><|begin|>"
     "assistant_tool_call<|content|>c<|end|><|begin|>assistant<|content|> a <|end|><|begin|>"
     "system<|content|> s <|end|>"},
    {"dots1", CONV(k_std), true,
     "<|system|>You are a helpful assistant<|endofsystem|><|userprompt|>Hello<|endofuserprompt|>"
     "<|response|>Hi there<|endofresponse|><|userprompt|>Who are you<|endofuserprompt|>"
     "<|response|>   I am an assistant   <|endofresponse|><|userprompt|>Another "
     "question<|endofuserprompt|><|response|>"},
    {"dots1", CONV(k_std), false,
     "<|system|>You are a helpful assistant<|endofsystem|><|userprompt|>Hello<|endofuserprompt|>"
     "<|response|>Hi there<|endofresponse|><|userprompt|>Who are you<|endofuserprompt|>"
     "<|response|>   I am an assistant   <|endofresponse|><|userprompt|>Another "
     "question<|endofuserprompt|>"},
    {"dots1", CONV(k_roles), false,
     "<|userprompt|>u<|endofuserprompt|><|response|>t<|endofresponse|><|response|>"
     "f<|endofresponse|><|response|>i<|endofresponse|><|response|>c<|endofresponse|><|response|> "
     "a <|endofresponse|><|system|> s <|endofsystem|>"},
    {"gemma", CONV(k_gemma_model), true,
     "<start_of_turn>model\nm<end_of_turn>\n"
     "<start_of_turn>user\ns\n\nu<end_of_turn>\n"
     "<start_of_turn>model\n"},
};

/* Real sources: llama.cpp's models/templates, and test-chat-template.cpp's template_str. */
typedef struct file_case {
    const char *file; /* under the data folder */
    const char *family;
} file_case;

static const file_case k_files[] = {
    {"openai-gpt-oss-120b.jinja", "gpt-oss"},
    {"Kimi-K2-Instruct.jinja", "kimi-k2"},
    {"Kimi-K2-Thinking.jinja", "kimi-k2"},
    {"moonshotai-Kimi-K2.jinja", "kimi-k2"},
    {"ByteDance-Seed-OSS.jinja", "seed_oss"},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", "granite"},
    {"ibm-granite-granite-4.0.jinja", "granite-4.0"},
    {"ibm-granite-granite-4.1.jinja", "granite-4.1"},
    {"inclusionai-ling-3.0-flash.jinja", "bailing2"},
    {"llama-cpp-rwkv-world.jinja", "rwkv-world"},
    {"upstage-Solar-Open-100B.jinja", "solar-open"},
    /* GLM-4.5's family: llama.cpp formats GLM-4.6 / 4.7 as chatglm4 ([gMASK]<sop>) */
    {"GLM-4.6.jinja", "chatglm4"},
    {"GLM-4.7-Flash.jinja", "chatglm4"},
    /* granite 4's telltales <tools> / <tool_call> appear in chatml templates too */
    {"Qwen-Qwen3-0.6B.jinja", "chatml"},
    /* chatml without SmolVLM's <end_of_utterance> */
    {"HuggingFaceTB-SmolLM3-3B.jinja", "chatml"},
};

/* Telltales alone (no source of these models' templates in llama.cpp), and mixtures whose
 * family llama.cpp's order decides (each checked against llama.cpp's detection). */
typedef struct text_case {
    const char *text, *family;
} text_case;

#define HY_ASSISTANT "<｜hy_Assistant｜>"
static const text_case k_texts[] = {
    {"{{ '<|startoftext|>' + m + '<|extra_4|>' }}{{ '<|extra_0|>' }}", "hunyuan-moe"},
    {HY_ASSISTANT "<｜hy_place▁holder▁no▁3｜>", "hunyuan-dense"},
    {HY_ASSISTANT "<｜hy_begin▁of▁sentence｜>", "hunyuan-vl"},
    {HY_ASSISTANT "<｜hy_place▁holder▁no▁3｜><｜hy_begin▁of▁sentence｜>", "hunyuan-vl"},
    {"[|system|] [|assistant|] [|endofturn|] [|tool|]", "exaone4"},
    {"[|system|] [|assistant|] [|endofturn|]", "exaone3"},
    {"<|system|> <|user|> <|assistant|> <|tool_declare|>", "exaone-moe"},
    {"<|user|> <|assistant|> <|end|> <|tool_declare|>", "phi3"},
    {"<|user|> <|assistant|> </s>", "falcon3"},
    {"<|im_start|>User: <end_of_utterance>", "smolvlm"},
    {"<|im_start|> <|start|> <|channel|>", "chatml"},
    {"<|im_start|> <|im_assistant|>assistant<|im_middle|>", "chatml"},
    {"<|start|> <|message|> <|channel|>", "gpt-oss"},
    {"<|header_start|> <|header_end|> <|start|> <|channel|>", "llama4"},
    {"<|im_assistant|>assistant<|im_middle|>", "kimi-k2"},
    {"<seed:bos>", "seed_oss"},
    {"<|start_header_id|> <|end_header_id|> <seed:bos>", "llama3"},
    {"<|userprompt|> <|endofuserprompt|>", "dots1"},
    {"<|endofuserprompt|> <|extra_0|> <|extra_4|>", "dots1"},
    {"'Assistant: '  + message['content'] + '<|separator|>", "grok-2"},
    {"[unused9]系统：[unused10]", "pangu-embedded"},
    {"<|begin|> <|end|> <|content|>", "solar-open"},
    {"<|begin|> <|end|> <|content|> <|assistant|>", "phi3"},
    {" Ассистент:", "yandex"},
    {"<role>ASSISTANT</role> 'HUMAN' \"HUMAN\" <think>", "bailing"},
    {"<role>ASSISTANT</role> \"HUMAN\" <think>", "bailing-think"},
    {"<role>ASSISTANT</role> <role>HUMAN</role> <|role_end|>", "bailing2"},
    {"<role>ASSISTANT</role> <role>HUMAN</role> <|role_end|> <|role_start|>", "megrez"},
    {"<|start_of_role|>", "granite"},
    {"<|start_of_role|> <tools>", "granite-4.1"},
    {"<|start_of_role|> <tool_call> g4_default_system_message", "granite-4.0"},
    {"<用户>", "minicpm"},
    {"bos_token + message['role']", "monarch"},
    {"'\\n\\nAssistant: ' + eos_token", "orion"},
    {"message['role'] + additional_special_tokens[0] + message['content'] + "
     "additional_special_tokens[1]",
     "gigachat"},
    /* names llama.cpp lacks: dots1 is only detected; seed_oss is spelled with "_" */
    {"dots1", "unknown"},
    {"seed-oss", "unknown"},
    {"<|tool_declare|>", "unknown"},
};

/* The family named name (sl_chat_name), or SL_CHAT_UNKNOWN. */
static sl_chat_tmpl family(const char *name)
{
    for (int t = SL_CHAT_CHATML; t < 256; t++)
        if (!strcmp(sl_chat_name((sl_chat_tmpl)t), name)) return (sl_chat_tmpl)t;
    return SL_CHAT_UNKNOWN;
}

static char *read_file(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    char chunk[4096];
    for (size_t k; (k = fread(chunk, 1, sizeof chunk, f)) > 0;) fwrite(chunk, 1, k, mem);
    fclose(mem);
    fclose(f);
    return buf;
}

static void check_apply(const apply_case *c)
{
    const sl_chat_tmpl t = family(c->family);
    CHECK_MSG(t != SL_CHAT_UNKNOWN, "no family '%s'", c->family);
    if (t == SL_CHAT_UNKNOWN) return;
    char *got = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&got, &len);
    CHECK(sl_chat_apply(t, c->msgs, c->n, c->add_ass, f) == 0);
    fclose(f);
    CHECK_MSG(len == strlen(c->want) && !memcmp(got, c->want, len),
              "%s (%zu messages, add_ass %d):\n  got  \"%s\"\n  want \"%s\"", c->family, c->n,
              c->add_ass, got, c->want);
    free(got);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : NULL;
    if (!dir)
        fprintf(stderr, "serve_chat_test: no templates directory given: the real-template "
                "detection cases are skipped (see the header)\n");
    for (size_t i = 0; i < sizeof k_apply / sizeof *k_apply; i++) check_apply(&k_apply[i]);

    for (size_t i = 0; dir && i < sizeof k_files / sizeof *k_files; i++) {
        char *src = read_file(dir, k_files[i].file);
        CHECK_MSG(src, "cannot read %s/%s", dir, k_files[i].file);
        if (!src) continue;
        const char *got = sl_chat_name(sl_chat_detect(src));
        CHECK_MSG(!strcmp(got, k_files[i].family), "%s: detected %s, want %s", k_files[i].file,
                  got, k_files[i].family);
        free(src);
    }
    for (size_t i = 0; i < sizeof k_texts / sizeof *k_texts; i++) {
        const char *got = sl_chat_name(sl_chat_detect(k_texts[i].text));
        CHECK_MSG(!strcmp(got, k_texts[i].family), "'%s': detected %s, want %s",
                  k_texts[i].text, got, k_texts[i].family);
    }

    /* every family but dots1 is also its own name, as llama.cpp's LLM_CHAT_TEMPLATES */
    int named = 0;
    for (int t = SL_CHAT_CHATML; strcmp(sl_chat_name((sl_chat_tmpl)t), "unknown"); t++) {
        const char *name = sl_chat_name((sl_chat_tmpl)t);
        const sl_chat_tmpl want = strcmp(name, "dots1") ? (sl_chat_tmpl)t : SL_CHAT_UNKNOWN;
        CHECK_MSG(sl_chat_detect(name) == want, "name '%s'", name);
        named++;
    }
    CHECK_MSG(named == 55, "%d families, llama.cpp 0c1e570 has 55", named);
    return sl_test_finish("serve_chat_test");
}
