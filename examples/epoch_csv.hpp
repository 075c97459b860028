// omgs-train-torch --csv PATH: one row per epoch and method, for time-to-accuracy plots
// (scripts/time-to-accuracy.sh reads it beside scripts/tta_ddp.py's rows, same columns).
#pragma once

#include <mpi.h>

#include <cstdio>
#include <string>

#include <omgs/error.hpp>

namespace omgs_examples {

/// Rows `method,seed,epoch,train_s,test_acc`: train_s is the method's training wall time
/// (rank 0's, evaluation excluded) summed up to the end of that epoch; test_acc in percent.
class EpochCsv {
 public:
  /// Collective. Writes nothing where path is empty; throws omgs::Error on every rank if
  /// rank 0 cannot create the file.
  EpochCsv(const std::string& path, MPI_Comm comm) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (path.empty()) return;
    int ok = 1;
    if (rank == 0) {
      file_ = std::fopen(path.c_str(), "w");
      ok = file_ != nullptr;
      if (file_ != nullptr) std::fprintf(file_, "method,seed,epoch,train_s,test_acc\n");
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    if (!ok) throw omgs::Error("--csv: cannot create '" + path + "'");
  }
  EpochCsv(const EpochCsv&) = delete;
  EpochCsv& operator=(const EpochCsv&) = delete;
  ~EpochCsv() {
    if (file_ != nullptr) std::fclose(file_);
  }

  /// Rank 0 writes (and flushes) a row; other ranks do nothing.
  void row(const char* method, long seed, int epoch, double train_s, double accuracy) {
    if (file_ == nullptr) return;
    std::fprintf(file_, "%s,%ld,%d,%.4f,%.2f\n", method, seed, epoch, train_s, accuracy);
    std::fflush(file_);
  }

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace omgs_examples
