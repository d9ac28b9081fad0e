// A fingerprint of a model's parameters for the replica check (consistency_check.hpp): equal on two
// ranks exactly when, barring a 2^-64 chance, their parameters are bitwise equal. Host tensors are
// hashed with XXH3 where they lie; device tensors are reduced on the device (each element's bits
// times a per-position odd weight, summed modulo 2^64, so any single changed element changes the
// sum), and only one number per parameter crosses to the host.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mnddp {

// `device_method`: the weighted sums, wherever the tensors are. Every rank must use the same method
// (the two give different values): the device method as soon as any rank trains on a GPU.
std::uint64_t parameter_fingerprint(const std::vector<at::Tensor>& parameters, bool device_method);
// The device method, on any tensors (the tests run it on the CPU).
std::uint64_t reduced_fingerprint(const std::vector<at::Tensor>& parameters);

// The replica-drift fault's perturbation: flips the top mantissa bit of the parameter's first element
// (a change of an eighth to a half of its value). Not the lowest bit: a one-ulp difference is often
// rounded away by the next update, and the replicas agree again.
void flip_mantissa_bit(const at::Tensor& parameter);

}  // namespace mnddp
