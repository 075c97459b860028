// Internal: the bounded arrival check that runs before the first collective of a
// communicator omgs does not own yet (docs/reliability.md, "Construction").
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace omgs::detail {

/// The tag of the arrival check's messages on the user's communicator. A receive the user
/// posts on that communicator with this tag, or with MPI_ANY_TAG, and leaves pending while
/// the check runs could take one of them (docs/reliability.md); 28525 is "om" in ASCII.
constexpr int arrival_tag = 28525;

/// Point-to-point, bounded, on `comm` (every rank calls it): each rank tells rank 0 it has
/// arrived; rank 0 waits at most `timeout_s` for the others and answers every rank that
/// arrived with the ranks that did not. The other ranks wait at most 2 x timeout_s for
/// that answer. Returns normally when every rank arrived; otherwise throws omgs::Error on
/// every rank that arrived, naming the missing ranks (or rank 0, if it never answered).
/// Nothing is sent when comm has one rank.
void check_arrival(MPI_Comm comm, double timeout_s, const std::string& who);

/// "rank 3", "ranks 1, 2 and 5"; past 16 the first 16 "and 984 more".
std::string rank_list(const std::vector<int>& ranks);

}  // namespace omgs::detail
