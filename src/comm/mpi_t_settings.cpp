// The allreduce settings reachable through MPI_T control variables
// (include/omgs/allreduce_form.hpp; which MPI allows what: docs/comm.md).
#include <mpi.h>

#include <map>
#include <mutex>
#include <string>

#include <omgs/allreduce_form.hpp>

namespace omgs {

namespace {

struct CvarState {
  std::mutex mutex;
  bool initialized = false;
  bool usable = false;                  ///< MPI_T_init_thread succeeded
  std::map<std::string, int> index;     ///< cvar name -> MPI_T index; -1 where unusable
  std::map<std::string, int> original;  ///< the value omgs first read, put back by apply(-1)
  int applied = -1;
};

CvarState& state() {
  static CvarState s;
  return s;
}

// MPI_T is initialized once and left so: MPI_T_finalize only drops a reference count, and
// every handle below is freed after its use. Callers hold the mutex.
int cvar_index(CvarState& s, const std::string& name) {
  if (!s.initialized) {
    s.initialized = true;
    // At MPI's own level: Open MPI's MPI_T_init_thread overwrites the level MPI_Query_thread
    // reports with the one asked for here (a lower one turned the progress threads off).
    int level = MPI_THREAD_SINGLE, provided = 0, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Query_thread(&level);
    s.usable = MPI_T_init_thread(level, &provided) == MPI_SUCCESS;
  }
  if (!s.usable) return -1;
  if (auto it = s.index.find(name); it != s.index.end()) return it->second;
  int n = 0, found = -1;
  MPI_T_cvar_get_num(&n);
  for (int i = 0; i < n && found < 0; ++i) {
    char cname[256], desc[8];
    int name_len = sizeof cname, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    if (MPI_T_cvar_get_info(i, cname, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                            &bind, &scope) != MPI_SUCCESS ||
        name != cname)
      continue;
    // One int, not bound to an object, and not fixed (Open MPI's coll_tuned_use_dynamic_rules
    // is MPI_T_SCOPE_READONLY, so its coll_tuned_allreduce_algorithm has no effect).
    const bool writable = scope != MPI_T_SCOPE_CONSTANT && scope != MPI_T_SCOPE_READONLY;
    found = type == MPI_INT && bind == MPI_T_BIND_NO_OBJECT && writable ? i : -2;
  }
  s.index[name] = found < 0 ? -1 : found;
  return s.index[name];
}

// Reads (write == false) or writes `value` of cvar `name`; false where any call fails.
bool access(CvarState& s, const std::string& name, int& value, bool write) {
  const int i = cvar_index(s, name);
  if (i < 0) return false;
  MPI_T_cvar_handle h;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(i, nullptr, &h, &count) != MPI_SUCCESS) return false;
  bool ok = count == 1;
  if (ok) ok = (write ? MPI_T_cvar_write(h, &value) : MPI_T_cvar_read(h, &value)) == MPI_SUCCESS;
  MPI_T_cvar_handle_free(&h);
  if (ok && !write) s.original.emplace(name, value);  // kept from the first read only
  return ok;
}

bool write_and_check(CvarState& s, const std::string& name, int value) {
  int v = value, back = 0;
  return access(s, name, v, true) && access(s, name, back, false) && back == value;
}

}  // namespace

const std::vector<AllreduceSetting>& allreduce_settings() {
  static const std::vector<AllreduceSetting> table = {
      {"coll_libnbc_iallreduce_algorithm", 1, "libnbc ring"},
      {"coll_libnbc_iallreduce_algorithm", 3, "libnbc rabenseifner"},
  };
  return table;
}

std::vector<int> writable_allreduce_settings() {
  CvarState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<int> out;
  const std::vector<AllreduceSetting>& table = allreduce_settings();
  for (std::size_t i = 0; i < table.size(); ++i) {
    const std::string name(table[i].cvar);
    int now = 0;
    if (!access(s, name, now, false)) continue;
    const bool ok = write_and_check(s, name, table[i].value);
    access(s, name, now, true);  // as it was
    if (ok) out.push_back(static_cast<int>(i));
  }
  return out;
}

bool apply_allreduce_setting(int setting) {
  CvarState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const std::vector<AllreduceSetting>& table = allreduce_settings();
  if (setting < -1 || setting >= static_cast<int>(table.size())) return false;
  bool ok = true;
  if (setting == -1) {
    for (auto& [name, value] : s.original) ok = write_and_check(s, name, value) && ok;
    s.applied = -1;
    return ok;
  }
  const AllreduceSetting& a = table[static_cast<std::size_t>(setting)];
  int now = 0;
  ok = access(s, std::string(a.cvar), now, false) &&
       write_and_check(s, std::string(a.cvar), a.value);
  s.applied = ok ? setting : s.applied;
  return ok;
}

int applied_allreduce_setting() {
  CvarState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.applied;
}

}  // namespace omgs
