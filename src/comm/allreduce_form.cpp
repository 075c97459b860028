// The allreduce's forms and the start-up measurement that chooses among them
// (include/omgs/allreduce_form.hpp).
#include <omgs/allreduce_form.hpp>
#include <omgs/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "comm/clock.hpp"
#include "comm/collectives.hpp"

namespace omgs {

std::string_view to_string(DenseAllreduce mode) {
  switch (mode) {
    case DenseAllreduce::automatic:
      return "automatic";
    case DenseAllreduce::nonblocking:
      return "nonblocking";
    case DenseAllreduce::blocking:
      return "blocking";
  }
  return "unknown";
}

DenseAllreduce parse_dense_allreduce(std::string_view name) {
  for (DenseAllreduce m :
       {DenseAllreduce::automatic, DenseAllreduce::nonblocking, DenseAllreduce::blocking})
    if (name == to_string(m)) return m;
  throw Error("omgs: unknown dense allreduce '" + std::string(name) +
              "' (expected automatic, nonblocking or blocking)");
}

std::string_view to_string(AllreduceForm form) {
  switch (form) {
    case AllreduceForm::nonblocking_in_place:
      return "MPI_Iallreduce in-place";
    case AllreduceForm::nonblocking:
      return "MPI_Iallreduce";
    case AllreduceForm::blocking:
      return "MPI_Allreduce (blocking)";
  }
  return "unknown";
}

std::string AllreduceFormChoice::describe() const {
  std::ostringstream os;
  os.precision(3);
  os << to_string(form) << ":";
  const char* sep = " ";
  for (std::size_t f = 0; f < allreduce_forms; ++f) {
    if (std::isnan(median_s[f])) continue;
    os << sep << to_string(static_cast<AllreduceForm>(f)) << " " << median_s[f] << " s";
    sep = ", ";
  }
  os << " (" << 4.0 * static_cast<double>(numel) << " B, " << describe_allreduce_setting() << ")";
  return os.str();
}

std::string describe_allreduce_setting() {
  if (const char* v = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm")) {
    const std::string s = v;
    const char* names[] = {"auto", "ring", "binomial", "rabenseifner"};
    const int i = std::atoi(v);
    return "libnbc alg " + s +
           (i >= 0 && i <= 3 && s == std::to_string(i) ? std::string("=") + names[i] : "");
  }
  if (const char* v = std::getenv("MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM"))
    return std::string("mpich ") + v;
  return "MPI's auto";
}

AllreduceFormChoice choose_allreduce_form(MPI_Comm comm, std::size_t numel, int trials,
                                          const std::vector<AllreduceForm>& candidates) {
  // The forms every rank offers (a bit per form, AND over the ranks).
  unsigned mine = 0;
  for (AllreduceForm f : candidates) mine |= 1u << static_cast<unsigned>(f);
  unsigned common = 0;
  MPI_Allreduce(&mine, &common, 1, MPI_UNSIGNED, MPI_BAND, comm);
  if (common == 0) throw Error("omgs: choose_allreduce_form: no form that every rank offers");
  AllreduceFormChoice c;
  c.numel = std::max<std::size_t>(1, numel);
  std::vector<AllreduceForm> timed;
  for (std::size_t f = 0; f < allreduce_forms; ++f)
    if ((common >> f) & 1u) timed.push_back(static_cast<AllreduceForm>(f));
  std::vector<double> t[allreduce_forms];
  for (AllreduceForm f : timed) (void)detail::time_allreduce_form(comm, c.numel, 1, f);  // warm-up
  for (int r = 0; r < std::max(1, trials); ++r)
    for (AllreduceForm f : timed)
      t[static_cast<std::size_t>(f)].push_back(detail::time_allreduce_form(comm, c.numel, 1, f)[0]);
  for (std::size_t f = 0; f < allreduce_forms; ++f) {
    std::vector<double>& v = t[f];
    std::sort(v.begin(), v.end());
    c.median_s[f] = v.empty() ? std::numeric_limits<double>::quiet_NaN()
                              : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
  }
  // Rank 0's measurement decides for everyone.
  MPI_Bcast(c.median_s.data(), static_cast<int>(allreduce_forms), MPI_DOUBLE, 0, comm);
  c.form = timed.front();
  for (AllreduceForm f : timed)
    if (c.median_s[static_cast<std::size_t>(f)] < c.median_s[static_cast<std::size_t>(c.form)])
      c.form = f;
  return c;
}

namespace detail {

std::vector<double> time_allreduce_form(MPI_Comm comm, std::size_t floats, int repetitions,
                                        AllreduceForm form) {
  std::vector<float> a(floats, 0.0f), b(form == AllreduceForm::nonblocking_in_place ? 0 : floats);
  const int n = static_cast<int>(floats);
  std::vector<double> t;
  for (int r = 0; r < repetitions; ++r) {
    MPI_Barrier(comm);
    const double t0 = now_s();
    if (form == AllreduceForm::blocking) {
      MPI_Allreduce(a.data(), b.data(), n, MPI_FLOAT, MPI_SUM, comm);
    } else {
      const bool in_place = form == AllreduceForm::nonblocking_in_place;
      MPI_Request req;
      MPI_Iallreduce(in_place ? MPI_IN_PLACE : a.data(), in_place ? a.data() : b.data(), n,
                     MPI_FLOAT, MPI_SUM, comm, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    t.push_back(now_s() - t0);
  }
  return t;
}

}  // namespace detail

}  // namespace omgs
