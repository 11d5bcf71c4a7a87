// Package hw is the hardware catalog (GPU families, CPU node models as SPECpower curves) and the
// physics kueuelab uses to turn a pod's profile and a node's power cap into watts and speed.
// It is pure arithmetic on plain values: the agent's engine calls it every tick.
//
// GPU power. For utilisation u and memory intensity m (both in [0, 1]):
//
//	P_natural(u, m) = idle + (max − idle) · u^α · (1 − β·m)
//
// so a compute-bound kernel mix at full utilisation draws the board limit and a memory-bound one
// draws less (β). α < 1 because nvidia-smi utilisation is the share of time a kernel runs, and
// even a partly busy GPU clocks up. Under a cap C the board draws min(C, P_natural).
//
// Throughput under a cap, with r = C / P_natural:
//
//	compute-bound  T_c = min(1, r^γ)
//	memory-bound   T_m = 1 − ε·(1 − r)^γm  (1 when r ≥ 1)
//	T = (1 − m)·T_c + m·T_m, always in (0, 1] and non-decreasing in C.
//
// MIG. A family with a mig table splits into instances of NVIDIA's GPU-instance profiles: a
// profile takes the share c of the GPU's compute slices (3/7 for 3g.40gb) and f of its memory
// slices, i.e. of memory, L2 and bandwidth (4/8), at one of its placement starts on the
// memory-slice axis (nvidia-smi mig -lgipp). A pod profiled on a whole GPU at utilisation u and
// memory intensity m runs on the slice with
//
//	slowdown   S = (1 − m)·max(1, u/c) + m·max(1, u/f),  throughput = 1/S
//	power      P = c·idle + (max − idle)·c·min(1, u/c)^α·(1 − β·m)
//
// A job that kept u of a whole GPU's SMs busy needs u/c times longer on c of them once u > c,
// and its memory-bound share likewise on f of the bandwidth; below that the slice is not its
// bottleneck. The power is the slice's share of the board's idle and dynamic draw, its own
// utilisation being min(1, u/c): seven saturated 1g slices of one GPU draw exactly max, and the
// full profile (c = f = 1) is P_natural with throughput 1. A board power cap applies to the whole
// GPU, so it is not modelled per slice.
//
// CPU power interpolates the node model's SPECpower curve (watts at 0, 10, …, 100 % load). A CPU
// power cap (a fraction of the curve's 100 % point) lowers frequency f until
// P(0) + (P(load) − P(0))·f^k fits, f ≥ minFrequency; CPU throughput scales with f.
// Node power = CPU + Σ GPU + platform constant.
package hw
