/* Header only: see include/fuzz_driver.h. (SwiftPM wants a source file per C target.) */
#include "fuzz_driver.h"
