// The specs of the optimizers declared in optimizer.h: each names its
// hyperparameters, slots and update ops (ops/training_ops.h,
// ops/sparse_training_ops.h, ops/hash_table_ops.h); Optimizer builds the
// graph from them.
#include "recflow/train/optimizer.h"

namespace recflow::train {
namespace {

using Input = OptimizerSpec::Input;
using Kind = OptimizerSpec::Input::Kind;

Input Var() { return {Kind::kVariable}; }
Input Grad() { return {Kind::kGrad}; }
Input Ids() { return {Kind::kIndices}; }
Input Step() { return {Kind::kStep}; }
Input SlotIn(std::string name) { return {Kind::kSlot, std::move(name)}; }
Input NonSlotIn(std::string name) { return {Kind::kNonSlot, std::move(name)}; }
Input HyperIn(std::string name) { return {Kind::kHyper, std::move(name)}; }

bool NonNegative(double v) { return v >= 0; }
bool NonPositive(double v) { return v <= 0; }
bool Positive(double v) { return v > 0; }

}  // namespace

OptimizerSpec GradientDescentSpec(const GradientDescentOptions& options) {
  OptimizerSpec s;
  s.name = options.name;
  s.hypers = {{"learning_rate", options.learning_rate}};
  s.dense = {"ApplyGradientDescent",
             {Var(), HyperIn("learning_rate"), Grad()},
             {{"use_locking", options.use_locking}}};
  s.table = {"HashTableApplyGradientDescent",
             {Var(), Ids(), Grad(), HyperIn("learning_rate"), Step()}};
  return s;
}

OptimizerSpec MomentumSpec(const MomentumOptions& options) {
  OptimizerSpec s;
  s.name = options.name;
  s.hypers = {{"learning_rate", options.learning_rate},
              {"momentum", options.momentum}};
  s.slots = {{"momentum", 0.0}};
  s.dense = {"ApplyMomentum",
             {Var(), SlotIn("momentum"), HyperIn("learning_rate"), Grad(),
              HyperIn("momentum")},
             {{"use_locking", options.use_locking},
              {"use_nesterov", options.use_nesterov}}};
  return s;
}

OptimizerSpec AdagradSpec(const AdagradOptions& options) {
  OptimizerSpec s;
  s.name = options.name;
  s.hypers = {{"learning_rate", options.learning_rate},
              {"epsilon", options.epsilon}};
  s.slots = {{"accumulator", options.initial_accumulator_value}};
  // epsilon 0 is TensorFlow 1's ApplyAdagrad, which has no epsilon input.
  const bool v2 = options.epsilon > 0;
  s.requirements = {
      {"epsilon", options.epsilon, ">= 0", NonNegative},
      {"initial_accumulator_value", options.initial_accumulator_value,
       v2 ? ">= 0" : "positive (or >= 0 with epsilon > 0)",
       v2 ? NonNegative : Positive}};
  const std::vector<std::pair<std::string, bool>> attrs = {
      {"use_locking", options.use_locking}, {"update_slots", true}};
  if (v2) {
    s.dense = {"ApplyAdagradV2",
               {Var(), SlotIn("accumulator"), HyperIn("learning_rate"),
                HyperIn("epsilon"), Grad()},
               attrs};
  } else {
    s.dense = {"ApplyAdagrad",
               {Var(), SlotIn("accumulator"), HyperIn("learning_rate"), Grad()},
               attrs};
  }
  s.table = {"HashTableApplyAdagrad",
             {Var(), Ids(), Grad(), HyperIn("learning_rate"),
              HyperIn("epsilon"), Step()}};
  return s;
}

namespace {

// What Adam and AdamW share: slots, beta powers, hyperparameters and the
// inputs of ApplyAdam up to epsilon.
OptimizerSpec AdamBase(std::string name, Hyperparameter learning_rate,
                       double beta1, double beta2, Hyperparameter epsilon) {
  OptimizerSpec s;
  s.name = std::move(name);
  s.hypers = {{"learning_rate", learning_rate},
              {"beta1", beta1},
              {"beta2", beta2},
              {"epsilon", epsilon}};
  s.slots = {{"m", 0.0}, {"v", 0.0}};
  s.non_slots = {{"beta1_power", beta1, "beta1"},
                 {"beta2_power", beta2, "beta2"}};
  s.dense.inputs = {Var(),
                    SlotIn("m"),
                    SlotIn("v"),
                    NonSlotIn("beta1_power"),
                    NonSlotIn("beta2_power"),
                    HyperIn("learning_rate"),
                    HyperIn("beta1"),
                    HyperIn("beta2"),
                    HyperIn("epsilon")};
  return s;
}

}  // namespace

OptimizerSpec AdamSpec(const AdamOptions& options) {
  OptimizerSpec s = AdamBase(options.name, options.learning_rate, options.beta1,
                             options.beta2, options.epsilon);
  s.dense.op = "ApplyAdam";
  s.dense.inputs.push_back(Grad());
  s.dense.attrs = {{"use_locking", options.use_locking},
                   {"use_nesterov", options.use_nesterov}};
  s.sparse_update = options.lazy_sparse;
  // Always lazy: an unbounded table has no dense update.
  s.table = {"HashTableApplyAdam",
             {Var(), Ids(), Grad(), HyperIn("learning_rate"), HyperIn("beta1"),
              HyperIn("beta2"), HyperIn("epsilon"), Step()}};
  return s;
}

OptimizerSpec AdamWSpec(const AdamWOptions& options) {
  OptimizerSpec s = AdamBase(options.name, options.learning_rate, options.beta1,
                             options.beta2, options.epsilon);
  s.hypers.insert({"weight_decay", options.weight_decay});
  s.dense.op = "ApplyAdamW";
  s.dense.inputs.push_back(HyperIn("weight_decay"));
  s.dense.inputs.push_back(Grad());
  s.dense.attrs = {{"use_locking", options.use_locking},
                   {"use_nesterov", options.use_nesterov}};
  s.sparse_update = false;  // the decay applies to every row
  s.table_unsupported =
      "decoupled weight decay would touch every row; use Adam";
  return s;
}

OptimizerSpec FtrlSpec(const FtrlOptions& options) {
  OptimizerSpec s;
  s.name = options.name;
  s.hypers = {
      {"learning_rate", options.learning_rate},
      {"learning_rate_power", options.learning_rate_power},
      {"l1_regularization_strength", options.l1_regularization_strength},
      {"l2_regularization_strength", options.l2_regularization_strength},
      {"l2_shrinkage_regularization_strength",
       options.l2_shrinkage_regularization_strength}};
  s.slots = {{"accum", options.initial_accumulator_value}, {"linear", 0.0}};
  s.requirements = {
      {"initial_accumulator_value", options.initial_accumulator_value, ">= 0",
       NonNegative},
      {"learning_rate_power", options.learning_rate_power, "<= 0", NonPositive,
       /*for_tables=*/true},
      {"l1_regularization_strength", options.l1_regularization_strength, ">= 0",
       NonNegative},
      {"l2_regularization_strength", options.l2_regularization_strength, ">= 0",
       NonNegative},
      {"l2_shrinkage_regularization_strength",
       options.l2_shrinkage_regularization_strength, ">= 0", NonNegative}};
  // A constant shrinkage of 0 is ApplyFtrl, without the input (as
  // TensorFlow does); anything else ApplyFtrlV2.
  const Hyperparameter& shrinkage =
      options.l2_shrinkage_regularization_strength;
  const bool v2 = !(shrinkage.is_constant() && shrinkage.value() == 0);
  s.dense.op = v2 ? "ApplyFtrlV2" : "ApplyFtrl";
  s.dense.inputs = {Var(),
                    SlotIn("accum"),
                    SlotIn("linear"),
                    Grad(),
                    HyperIn("learning_rate"),
                    HyperIn("l1_regularization_strength"),
                    HyperIn("l2_regularization_strength")};
  if (v2) {
    s.dense.inputs.push_back(HyperIn("l2_shrinkage_regularization_strength"));
  }
  s.dense.inputs.push_back(HyperIn("learning_rate_power"));
  s.dense.attrs = {{"use_locking", options.use_locking},
                   {"multiply_linear_by_lr", false}};
  s.table = {"HashTableApplyFtrl",
             {Var(), Ids(), Grad(), HyperIn("learning_rate"),
              HyperIn("l1_regularization_strength"),
              HyperIn("l2_regularization_strength"),
              HyperIn("l2_shrinkage_regularization_strength"),
              HyperIn("learning_rate_power"), Step()}};
  return s;
}

}  // namespace recflow::train
