// A walk over a pickle's opcodes that builds nothing, for the pickles LibTorch's own unpickler
// reads (the data.pkl, constants.pkl and .debug_pkl records of detforge's checkpoints). That
// unpickler sizes its memo table for the largest index a LONG_BINPUT names (a 13 KB checkpoint
// naming index 1,986,619,491 made it allocate 32 GiB: found by fuzz_checkpoint) and overflows
// the stack on a structure nested 3,000,000 deep. No LibTorch here.
#pragma once

#include <cstddef>
#include <string>

namespace detforge::weights {

/// Walks the `size` bytes at `data` opcode by opcode (protocols 0-5) up to STOP, tracking the
/// stack's nesting depths and the memo. Throws IoError naming `what` for a memo index (PUT,
/// BINPUT, LONG_BINPUT) beyond the entries stored so far (every pickler numbers them 0, 1, 2,
/// ...: the table then grows by at most one per opcode), a structure nested deeper than 1,000
/// levels, an opcode pickle does not define, a stack or MARK read past its end, an argument past
/// the end of the bytes, or no STOP.
void check_pickle_limits(const std::string& what, const char* data, size_t size);

}  // namespace detforge::weights
