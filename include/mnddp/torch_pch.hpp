// Precompiled header for the torch half of mnddp: the heavy LibTorch headers, parsed once.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn.h>
#include <torch/optim.h>
