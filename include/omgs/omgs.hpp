// The umbrella header: everything a training code uses.
#pragma once

#include <omgs/comm.hpp>
#include <omgs/error.hpp>
#include <omgs/plan.hpp>
#include <omgs/queue.hpp>
#include <omgs/runtime.hpp>
#include <omgs/select.hpp>
