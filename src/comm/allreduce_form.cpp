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

std::string AllreduceFormChoice::name() const {
  std::string n(to_string(form));
  if (setting >= 0 && static_cast<std::size_t>(setting) < allreduce_settings().size())
    n += " + " + std::string(allreduce_settings()[static_cast<std::size_t>(setting)].label) +
         " (MPI_T)";
  return n;
}

std::string AllreduceFormChoice::describe() const {
  std::ostringstream os;
  os.precision(3);
  os << name() << ":";
  const char* sep = " ";
  for (std::size_t f = 0; f < allreduce_forms; ++f) {
    if (std::isnan(median_s[f])) continue;
    os << sep << to_string(static_cast<AllreduceForm>(f)) << " " << median_s[f] << " s";
    sep = ", ";
  }
  for (std::size_t i = 0; i < setting_median_s.size() && i < allreduce_settings().size(); ++i) {
    if (std::isnan(setting_median_s[i])) continue;
    os << sep << to_string(setting_form) << " + " << allreduce_settings()[i].label << " "
       << setting_median_s[i] << " s";
    sep = ", ";
  }
  os << " (" << 4.0 * static_cast<double>(numel) << " B, " << describe_allreduce_setting() << ")";
  return os.str();
}

std::string describe_allreduce_setting() {
  const int applied = applied_allreduce_setting();
  if (applied >= 0)
    return std::string(allreduce_settings()[static_cast<std::size_t>(applied)].label) + " (MPI_T)";
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

namespace {

/// How much faster than every non-blocking candidate the blocking MPI_Allreduce must time
/// for the chooser to take it (docs/api.md).
constexpr double blocking_margin = 0.10;

/// One timed candidate: a form, with a setting applied (-1: none).
struct Candidate {
  AllreduceForm form;
  int setting;
};

/// Collective: the candidates every rank offers, in the same order on every rank.
std::vector<Candidate> agreed_candidates(MPI_Comm comm, const std::vector<AllreduceForm>& forms,
                                         bool settings, AllreduceForm& setting_form) {
  unsigned mine[2] = {0, 0};  // a bit per form, a bit per setting; AND over the ranks
  for (AllreduceForm f : forms) mine[0] |= 1u << static_cast<unsigned>(f);
  if (settings)
    for (int s : writable_allreduce_settings()) mine[1] |= 1u << static_cast<unsigned>(s);
  unsigned common[2] = {0, 0};
  MPI_Allreduce(mine, common, 2, MPI_UNSIGNED, MPI_BAND, comm);
  if (common[0] == 0) throw Error("omgs: choose_allreduce_form: no form that every rank offers");
  std::vector<Candidate> out;
  for (std::size_t f = 0; f < allreduce_forms; ++f)
    if ((common[0] >> f) & 1u) out.push_back({static_cast<AllreduceForm>(f), -1});
  // The settings steer MPI_Iallreduce: timed with its separate-buffer form if offered.
  const unsigned nb = 1u << static_cast<unsigned>(AllreduceForm::nonblocking);
  const unsigned nb_in_place = 1u << static_cast<unsigned>(AllreduceForm::nonblocking_in_place);
  if ((common[0] & (nb | nb_in_place)) == 0) common[1] = 0;
  setting_form =
      (common[0] & nb) != 0 ? AllreduceForm::nonblocking : AllreduceForm::nonblocking_in_place;
  for (std::size_t s = 0; s < allreduce_settings().size(); ++s)
    if ((common[1] >> s) & 1u) out.push_back({setting_form, static_cast<int>(s)});
  return out;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

}  // namespace

AllreduceFormChoice choose_allreduce_form(MPI_Comm comm, std::size_t numel, int trials,
                                          const std::vector<AllreduceForm>& candidates,
                                          bool settings) {
  AllreduceFormChoice c;
  const std::vector<Candidate> timed =
      agreed_candidates(comm, candidates, settings, c.setting_form);
  c.numel = std::max<std::size_t>(1, numel);
  std::vector<std::vector<double>> t(timed.size());
  auto time = [&](std::size_t i) {
    apply_allreduce_setting(timed[i].setting);  // every rank alike: the list is agreed
    return detail::time_allreduce_form(comm, c.numel, 1, timed[i].form)[0];
  };
  for (std::size_t i = 0; i < timed.size(); ++i) (void)time(i);  // warm-up
  for (int r = 0; r < std::max(1, trials); ++r)
    for (std::size_t i = 0; i < timed.size(); ++i) t[i].push_back(time(i));
  // Rank 0's measurement decides for everyone.
  std::vector<double> med(timed.size());
  for (std::size_t i = 0; i < timed.size(); ++i) med[i] = median_of(t[i]);
  MPI_Bcast(med.data(), static_cast<int>(med.size()), MPI_DOUBLE, 0, comm);
  std::size_t best = 0, best_nb = timed.size();
  for (std::size_t i = 0; i < timed.size(); ++i) {
    if (med[i] < med[best]) best = i;
    if (timed[i].form != AllreduceForm::blocking &&
        (best_nb == timed.size() || med[i] < med[best_nb]))
      best_nb = i;
  }
  // The blocking form must win by a margin: it serializes the progress thread (no other
  // group's exchange moves while it blocks, buckets cannot overlap), which a lone timed call
  // does not show; a near-tie at a bucket's size picked it and cost 45% (docs/comm.md).
  if (timed[best].form == AllreduceForm::blocking && best_nb < timed.size() &&
      med[best_nb] <= med[best] * (1 + blocking_margin))
    best = best_nb;
  c.median_s.fill(std::numeric_limits<double>::quiet_NaN());
  c.setting_median_s.assign(allreduce_settings().size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t i = 0; i < timed.size(); ++i) {
    if (timed[i].setting < 0)
      c.median_s[static_cast<std::size_t>(timed[i].form)] = med[i];
    else
      c.setting_median_s[static_cast<std::size_t>(timed[i].setting)] = med[i];
  }
  c.form = timed[best].form;
  c.setting = timed[best].setting;
  apply_allreduce_setting(c.setting);
  return c;
}

namespace detail {

std::vector<double> time_allreduce_form(MPI_Comm comm, std::size_t floats, int repetitions,
                                        AllreduceForm form, const IdleOptions& idle) {
  std::vector<float> a(floats, 0.0f), b(form == AllreduceForm::nonblocking_in_place ? 0 : floats);
  const int n = static_cast<int>(floats);
  std::vector<double> t;
  for (int r = 0; r < repetitions; ++r) {
    barrier_as_progress_thread(comm, idle);
    const double t0 = now_s();
    if (form == AllreduceForm::blocking) {
      MPI_Allreduce(a.data(), b.data(), n, MPI_FLOAT, MPI_SUM, comm);
    } else {
      const bool in_place = form == AllreduceForm::nonblocking_in_place;
      MPI_Request req;
      MPI_Iallreduce(in_place ? MPI_IN_PLACE : a.data(), in_place ? a.data() : b.data(), n,
                     MPI_FLOAT, MPI_SUM, comm, &req);
      wait_as_progress_thread(req, idle);
    }
    t.push_back(now_s() - t0);
  }
  barrier_as_progress_thread(comm, idle);  // nobody leaves to poll while another is timed
  return t;
}

}  // namespace detail

}  // namespace omgs
