#ifndef ADORCH_FUZZ_DRIVER_H
#define ADORCH_FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

/* libFuzzer's driver (compiler-rt's FuzzerInterface.h), for a program that keeps its own
 * main: SwiftPM links every executable through a renamed main, so libFuzzer's cannot be
 * used. Defined only in builds with -sanitize=fuzzer. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
