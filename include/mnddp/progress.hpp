// The training loop's heartbeat, for the watchdog's second kind of hang. A collective left open past
// --collective-timeout is one kind; the other is a rank stuck outside any collective while no other
// rank waits for it: a world of one, or every rank hung at once (a deadlock in the data path, a GPU
// whose kernel never ends behind a host wait). No collective record ever shows that. So the loop
// notes progress at every batch, step and validation batch, every collective record counts too, and
// while the loop runs (Watched) the watchdog ends the rank when nothing has moved for longer than
// the timeout and no collective is open (watchdog.hpp).
#pragma once

namespace mnddp::progress {

// Something moved: a batch, a step, a collective's start or end. One relaxed atomic store.
void note();
// Seconds since the last note().
double seconds_idle();
// Whether the training loop is running (start-up and the end are not watched: they have their own
// collectives, and rank 0's lone work at start-up is bounded by the others' collective timeout).
bool watched();

// The loop runs while this lives.
class Watched {
 public:
  Watched();
  ~Watched();
  Watched(const Watched&) = delete;
  Watched& operator=(const Watched&) = delete;
};

}  // namespace mnddp::progress
