/* gguf/arch: the architectures' one list: every name parses back to its entry, an unknown name
 * is refused naming it and every supported one, and values outside the list have no name. */
#include <string.h>

#include "gguf/arch.h"
#include "tests/testing.h"

int main(void)
{
    sl_error e;
    sl_arch a = SL_ARCH_COUNT;
    CHECK(sl_arch_parse("llama4", &a, &e) == SL_ERR_UNSUPPORTED && a == SL_ARCH_COUNT);
    char refused[sizeof e.msg];
    memcpy(refused, e.msg, sizeof refused);
    CHECK(strstr(refused, "'llama4'") != NULL);
    for (int i = 0; i < SL_ARCH_COUNT; i++) {
        const char *name = sl_arch_name((sl_arch)i);
        CHECK(name && *name && strstr(refused, name));
        CHECK(sl_arch_parse(name, &a, &e) == SL_OK && a == (sl_arch)i);
        for (int j = 0; j < i; j++) CHECK(strcmp(name, sl_arch_name((sl_arch)j)) != 0);
    }
    CHECK(sl_arch_parse(NULL, &a, &e) == SL_ERR_UNSUPPORTED);
    CHECK(!sl_arch_name(SL_ARCH_COUNT) && !sl_arch_name((sl_arch)-1));
    return sl_test_finish("arch_test");
}
