// MLP: Flatten -> [Linear -> ReLU] x layers -> Dropout (per sample) -> Linear.
#include "mnddp/model/sample_randomness.hpp"
#include "zoo.hpp"

namespace mnddp {
namespace {

namespace nn = torch::nn;

class Mlp final : public Model {
 public:
  explicit Mlp(const ModelSpec& spec) {
    std::int64_t width = 1;
    for (auto d : spec.input_shape) width *= d;
    for (int i = 0; i < spec.layers; ++i) {
      body_->push_back(nn::Linear(width, spec.hidden));
      body_->push_back(nn::ReLU());
      width = spec.hidden;
    }
    body_->push_back(SampleDropout(spec.dropout, sample_randomness_));
    body_->push_back(nn::Linear(width, spec.num_outputs));
    register_module("body", body_);
  }
  at::Tensor forward(at::Tensor x) override { return body_->forward(x.flatten(1)); }

 private:
  nn::Sequential body_;
};

}  // namespace

std::shared_ptr<Model> make_mlp(const ModelSpec& spec) { return std::make_shared<Mlp>(spec); }

}  // namespace mnddp
