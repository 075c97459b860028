// omgs-train-torch --save-gradients PATH: the first N iterations' gradients of every rank
// (after backward, before averaging), gathered on rank 0 and written as a gradient file
// (gradient_file.hpp) once the N-th is in: a sample of real gradients for
// omgs-bench-sparse-allreduce --source file:PATH.
#pragma once

#include <mpi.h>

#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <omgs/error.hpp>

#include "gradient_file.hpp"

namespace omgs_examples {

class GradientSaver {
 public:
  /// Collective. No saving where path is empty. Throws omgs::Error on every rank if rank 0
  /// cannot create the file.
  GradientSaver(std::string path, int iterations, MPI_Comm comm,
                const std::vector<std::pair<std::string, std::uint64_t>>& layers)
      : path_(std::move(path)), want_(path_.empty() ? 0 : iterations), comm_(comm) {
    MPI_Comm_rank(comm, &rank_);
    int size = 1;
    MPI_Comm_size(comm, &size);
    file_.ranks = static_cast<std::uint32_t>(size);
    for (const auto& [name, numel] : layers) {
      file_.names.push_back(name);
      file_.numel.push_back(numel);
    }
    if (want_ == 0) return;
    int ok = 1;
    if (rank_ == 0) {
      std::FILE* f = std::fopen(path_.c_str(), "wb");
      ok = f != nullptr;
      if (f != nullptr) std::fclose(f);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    if (!ok) throw omgs::Error("--save-gradients: cannot create '" + path_ + "'");
  }

  /// Collective, every iteration: this rank's flat gradient (float, every layer in order).
  void add(const torch::Tensor& flat) {
    if (done_ >= want_) return;
    const auto n = static_cast<int>(file_.total());
    const auto ranks = static_cast<std::size_t>(file_.ranks);
    if (rank_ == 0) file_.data.resize(file_.data.size() + ranks * static_cast<std::size_t>(n));
    float* at = rank_ == 0
                    ? file_.data.data() + file_.data.size() - ranks * static_cast<std::size_t>(n)
                    : nullptr;
    const torch::Tensor mine = flat.contiguous();
    MPI_Gather(mine.data_ptr<float>(), n, MPI_FLOAT, at, n, MPI_FLOAT, 0, comm_);
    if (++done_ < want_) return;
    file_.iterations = static_cast<std::uint32_t>(want_);
    if (rank_ == 0) {
      write_gradient_file(path_, file_);
      std::printf(
          "omgs-train-torch: wrote %d iterations of %u ranks' gradients (%llu elements, "
          "%zu tensors) to %s\n",
          want_, file_.ranks, static_cast<unsigned long long>(file_.total()), file_.numel.size(),
          path_.c_str());
      std::fflush(stdout);
    }
    file_.data = {};
  }

 private:
  std::string path_;
  int want_ = 0, done_ = 0, rank_ = 0;
  MPI_Comm comm_;
  GradientFile file_;
};

}  // namespace omgs_examples
