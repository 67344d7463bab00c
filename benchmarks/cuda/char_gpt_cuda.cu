// benchmarks/char_gpt.cpp on the GPU: the same program, compiled by nvcc with the blocks,
// the tape and the optimizer on luminal::cuda, and PyTorch eager on CUDA as the peer.
#include "../char_gpt.cpp"
