// Moved to src/io/output_lock.hpp (issue #18: one I/O layer); this forward stays only while branches
// that include the old path are merged.
#pragma once
#include "io/output_lock.hpp"
