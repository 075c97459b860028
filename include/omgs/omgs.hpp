// The umbrella header: everything a training code uses.
#pragma once

#include <omgs/error.hpp>
#include <omgs/plan.hpp>
#include <omgs/select.hpp>
#include <omgs/queue.hpp>
#include <omgs/comm.hpp>
#include <omgs/runtime.hpp>
