// The watchdog thread: collective timeouts with a cross-rank diagnosis, health checks, and the
// exit deadline.
#include "mnddp/watchdog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <vector>

#include "mnddp/check.hpp"
#include "mnddp/comm/collective_tracker.hpp"
#include "mnddp/comm/health_checks.hpp"
#include "mnddp/device_binding.hpp"
#include "mnddp/diagnose/activity.hpp"
#include "mnddp/diagnose/incident.hpp"
#include "mnddp/fixed_text.hpp"
#include "mnddp/guarded_thread.hpp"
#include "mnddp/progress.hpp"

namespace mnddp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr int kRequestTag = 701;
constexpr int kReplyTag = 702;
constexpr int kIncidentAckTag = 703;
constexpr double kReplyWait = 3.0;     // seconds a diagnosis waits for the other ranks' answers
constexpr double kIncidentWait = 5.0;  // seconds the rank that sets off an incident waits for the others' records
// Seconds past the timeout before a rank where nothing moves ends itself (see run()).
constexpr double kNoProgressGrace = 15.0;

enum class Ask : std::int32_t { Where = 0, WriteIncident = 1 };

// A question to another rank's watchdog: where it is on a channel, or to write its incident record.
struct Request {
  Ask ask;
  std::int32_t exit_code;
  char channel[32];
  char reason[480];
};

// One rank's answer: where it is on the channel asked about, and a line on every channel.
struct Reply {
  std::int64_t started;
  std::int64_t finished;
  std::int64_t open_seq;  // 0: nothing open on that channel
  double open_age;
  double idle_s;
  char text[480];
};

std::string describe(const CollectiveRecord& r) {
  std::string text = fmt::format("{} #{} ({}", r.op, r.seq, human_bytes(r.bytes));
  if (!r.label.empty()) text += ", " + r.label;
  return text + ")";
}

std::string where_am_i() {
  std::vector<std::string> parts;
  const auto now = Clock::now();
  for (const auto& s : CollectiveTracker::snapshot_all()) {
    if (s.oldest_open) {
      parts.push_back(fmt::format("{}: in {} for {:.1f} s", s.channel, describe(*s.oldest_open),
                                  std::chrono::duration<double>(now - s.oldest_open->start).count()));
    } else if (s.last) {
      parts.push_back(fmt::format("{}: finished {} calls, the last {}, {:.1f} s ago", s.channel, s.finished,
                                  describe(*s.last), s.idle_s));
    } else {
      parts.push_back(fmt::format("{}: no calls yet", s.channel));
    }
  }
  return parts.empty() ? "no communicators" : fmt::format("{}", fmt::join(parts, "; "));
}

Reply make_reply(const std::string& channel) {
  Reply reply{};
  for (const auto& s : CollectiveTracker::snapshot_all()) {
    if (s.channel != channel) continue;
    reply.started = static_cast<std::int64_t>(s.started);
    reply.finished = static_cast<std::int64_t>(s.finished);
    reply.idle_s = s.idle_s;
    if (s.oldest_open) {
      reply.open_seq = static_cast<std::int64_t>(s.oldest_open->seq);
      reply.open_age = std::chrono::duration<double>(Clock::now() - s.oldest_open->start).count();
    }
  }
  const std::string text = where_am_i();
  copy_cut(reply.text, text);
  return reply;
}

// One question put to every other rank at once: the request sent to each, and a receive posted for
// each one's reply on `reply_tag`. Nonblocking: a rank that is gone simply never answers.
struct Questioning {
  Request request;  // lives as long as the sends that read it
  std::vector<Reply> replies;
  std::vector<MPI_Request> asks, answers;
  Questioning(MPI_Comm comm, const Request& question, int reply_tag, int me, int size)
      : request(question),
        replies(static_cast<std::size_t>(size)),
        asks(static_cast<std::size_t>(size), MPI_REQUEST_NULL),
        answers(static_cast<std::size_t>(size), MPI_REQUEST_NULL) {
    for (int r = 0; r < size; ++r) {
      if (r == me) continue;
      const auto i = static_cast<std::size_t>(r);
      MPI_Isend(&request, sizeof(request), MPI_BYTE, r, kRequestTag, comm, &asks[i]);
      MPI_Irecv(&replies[i], sizeof(Reply), MPI_BYTE, r, reply_tag, comm, &answers[i]);
    }
  }
  // Who has answered, once every rank has or `wait` seconds have passed. A rank that is gone never
  // answers; `serve` answers the others' questions meanwhile (two ranks asking at once must still
  // answer each other). This rank's own slot has no request and counts as answered.
  std::vector<bool> collect(double wait, const std::function<void()>& serve) {
    std::vector<bool> answered(answers.size(), false);
    const auto deadline = Clock::now() + std::chrono::duration<double>(wait);
    while (true) {
      serve();
      for (std::size_t r = 0; r < answers.size(); ++r) {
        int done = 0;
        if (!answered[r]) MPI_Test(&answers[r], &done, MPI_STATUS_IGNORE);
        answered[r] = answered[r] || done != 0;
      }
      if (std::ranges::find(answered, false) == answered.end() || Clock::now() >= deadline) return answered;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

}  // namespace

struct Watchdog::Impl {
  RankInfo rank;
  MPI_Comm comm = MPI_COMM_NULL;
  std::atomic<double> timeout_s{0.0};
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  // Replies on their way out, with their buffers (a std::list keeps addresses stable).
  std::list<std::pair<MPI_Request, Reply>> sending;
  std::mutex serve_mutex;
  std::thread thread;
  std::thread prober;
};

Watchdog::Watchdog(const RankInfo& rank, double timeout_s) : impl_(std::make_unique<Impl>()) {
  impl_->rank = rank;
  impl_->timeout_s = timeout_s;
  MNDDP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm));
  MNDDP_MPI_CHECK(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN));
  IncidentRecorder::set_peer_request(
      [this](const std::string& reason, int exit_code) { ask_for_incident_records(reason, exit_code); });
  impl_->thread = guarded_thread("watchdog", [this] {
    Activity::name_thread("watchdog");
    run();
  });
  impl_->prober = guarded_thread("device prober", [this] {
    Activity::name_thread("device prober");
    probe_devices();
  });
}

Watchdog::~Watchdog() {
  IncidentRecorder::set_peer_request({});
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  if (impl_->prober.joinable()) impl_->prober.join();
  for (auto& [request, reply] : impl_->sending) MPI_Request_free(&request);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&impl_->comm);
}

void Watchdog::set_timeout(double seconds) { impl_->timeout_s = seconds; }

void Watchdog::serve_requests() {
  // Answers every question waiting, without ever blocking on a peer. The watchdog's thread and a
  // thread asking for incident records (abort_all's) may both serve.
  std::lock_guard serving(impl_->serve_mutex);
  while (true) {
    int waiting = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kRequestTag, impl_->comm, &waiting, &status) != MPI_SUCCESS || !waiting) break;
    Request request{};
    MPI_Recv(&request, sizeof(request), MPI_BYTE, status.MPI_SOURCE, kRequestTag, impl_->comm, MPI_STATUS_IGNORE);
    request.channel[sizeof(request.channel) - 1] = '\0';
    request.reason[sizeof(request.reason) - 1] = '\0';
    if (request.ask == Ask::WriteIncident) {
      IncidentReport report;
      report.cause = IncidentCause::Request;
      report.reason = request.reason;
      report.exit_code = request.exit_code;
      report.origin = status.MPI_SOURCE;
      IncidentRecorder::write(report);  // once: a second asker gets its answer at once
      auto& [handle, reply] = impl_->sending.emplace_back(MPI_REQUEST_NULL, Reply{});
      MPI_Isend(&reply, sizeof(Reply), MPI_BYTE, status.MPI_SOURCE, kIncidentAckTag, impl_->comm, &handle);
      continue;
    }
    auto& [handle, reply] = impl_->sending.emplace_back(MPI_REQUEST_NULL, make_reply(request.channel));
    MPI_Isend(&reply, sizeof(Reply), MPI_BYTE, status.MPI_SOURCE, kReplyTag, impl_->comm, &handle);
  }
  for (auto it = impl_->sending.begin(); it != impl_->sending.end();) {
    int done = 0;
    MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
    it = done ? impl_->sending.erase(it) : std::next(it);
  }
}

void Watchdog::run() {
  while (true) {
    {
      std::unique_lock lock(impl_->mutex);
      if (impl_->wake.wait_for(lock, kTick, [&] { return impl_->stop; })) return;
    }
    serve_requests();
    // Host clocks only from here: no CUDA, no NCCL (the header says why).
    const double timeout = impl_->timeout_s.load();
    if (timeout <= 0) continue;
    // The lowest rank in a stuck call speaks first; the others would only repeat it.
    const double stagger = std::min(impl_->rank.rank, 20) * 0.25;
    bool any_open = false;
    for (const auto& s : CollectiveTracker::snapshot_all()) {
      if (!s.oldest_open) continue;
      any_open = true;
      const double age = std::chrono::duration<double>(Clock::now() - s.oldest_open->start).count();
      if (age > timeout + stagger) diagnose_and_abort(s.channel, s.oldest_open->seq, describe(*s.oldest_open), age);
    }
    // The other kind of hang: nothing moves and no collective is open (progress.hpp). Later than a
    // collective's timeout by the other ranks' diagnosis (their stagger, questions and records): when
    // another rank waits for this one, its verdict ("rank r never reached ...") says more.
    if (!any_open && progress::watched() && progress::seconds_idle() > timeout + kNoProgressGrace)
      no_progress_abort(progress::seconds_idle());
  }
}

void Watchdog::probe_devices() {
  while (true) {
    {
      std::unique_lock lock(impl_->mutex);
      if (impl_->wake.wait_for(lock, kTick, [&] { return impl_->stop; })) return;
    }
    try {
      // The event queries below run on the rank's device, not on device 0.
      bind_rank_device();
      if (auto problem = run_health_checks()) Runtime::abort_all(*problem, kExitFailure);
      CollectiveTracker::poll_all();
    } catch (const std::exception& e) {
      Runtime::abort_all(fmt::format("watchdog's device prober: {}", e.what()), kExitFailure);
    }
  }
}

void Watchdog::no_progress_abort(double idle) {
  std::string where = "no activity named";
  for (const auto& thread : Activity::snapshot())
    if (thread.name == "main" && !thread.what.empty())
      where = fmt::format("{} for {:.1f} s", thread.what, thread.seconds);
  const std::string summary = fmt::format(
      "no progress: this rank has finished no batch or step and started or ended no collective for {:.1f} s "
      "(--collective-timeout {:g}), and no collective is open, so no other rank can be waiting for it: a hang "
      "outside communication (its main thread: {})",
      idle, impl_->timeout_s.load(), where);
  IncidentReport report;
  report.cause = IncidentCause::Timeout;
  report.reason = summary;
  report.exit_code = kExitHang;
  IncidentRecorder::write(report);  // abort_all asks the others for theirs
  Runtime::abort_all(summary, kExitHang);
}

void Watchdog::ask_for_incident_records(const std::string& reason, int exit_code) {
  const int me = impl_->rank.rank;
  const int size = impl_->rank.world_size;
  Request request{};
  request.ask = Ask::WriteIncident;
  request.exit_code = exit_code;
  copy_cut(request.reason, reason);
  // On the heap, and never freed: a rank that answers late still writes into it, and the job ends next.
  auto& asked = *new Questioning(impl_->comm, request, kIncidentAckTag, me, size);
  asked.collect(kIncidentWait, [this] { serve_requests(); });
  // Requests to ranks that never answered stay pending; the job ends next, and they with it.
}

void Watchdog::diagnose_and_abort(const std::string& channel, std::uint64_t seq, const std::string& what, double age) {
  const int me = impl_->rank.rank;
  const int size = impl_->rank.world_size;
  Request request{};
  copy_cut(request.channel, channel);
  auto& asked = *new Questioning(impl_->comm, request, kReplyTag, me, size);  // never freed, as above
  std::vector<Reply>& replies = asked.replies;
  replies[static_cast<std::size_t>(me)] = make_reply(channel);
  const std::vector<bool> answered = asked.collect(kReplyWait, [this] { serve_requests(); });

  std::vector<int> behind, inside, ahead, silent;
  for (int r = 0; r < size; ++r) {
    const auto& reply = replies[static_cast<std::size_t>(r)];
    if (!answered[static_cast<std::size_t>(r)]) {
      silent.push_back(r);
      continue;
    }
    const auto s = static_cast<std::int64_t>(seq);
    if (reply.started < s)
      behind.push_back(r);
    else if (reply.finished >= s && reply.open_seq != s)
      ahead.push_back(r);
    else
      inside.push_back(r);
  }
  for (int r = 0; r < size; ++r) {
    const auto& reply = replies[static_cast<std::size_t>(r)];
    if (answered[static_cast<std::size_t>(r)])
      std::fprintf(stderr, "[%s] watchdog: rank %d: %s\n", impl_->rank.where().c_str(), r, reply.text);
  }
  std::string summary = fmt::format(
      "collective timeout: {} on the {} channel has not finished after {:.1f} s (--collective-timeout {:g})", what,
      channel, age, impl_->timeout_s.load());
  for (int r : behind) {
    const auto& reply = replies[static_cast<std::size_t>(r)];
    summary += fmt::format("; rank {} never reached it (its last call there was #{}, {:.1f} s ago)", r, reply.started,
                           reply.idle_s);
  }
  if (!silent.empty())
    summary += fmt::format("; no answer within {:g} s from rank(s) {} (stopped, or stuck outside MPI)", kReplyWait,
                           fmt::join(silent, ", "));
  if (behind.empty() && silent.empty() && ahead.empty())
    summary += fmt::format("; every rank is inside it (ranks {}): a stuck network or device", fmt::join(inside, ", "));
  // Finished by some while this rank still waits: its answers came in while the call completed, so a
  // rank reached it late (slower than the timeout), not never.
  if (!ahead.empty())
    summary += fmt::format("; rank(s) {} finished it while this rank asked: a rank reached it later than the timeout",
                           fmt::join(ahead, ", "));

  // The incident: this rank's record with what it learned of every other, then theirs.
  IncidentReport report;
  report.cause = IncidentCause::Timeout;
  report.reason = summary;
  report.exit_code = kExitHang;
  report.stuck = StuckCall{channel, seq, what, age};
  for (int r = 0; r < size; ++r) {
    const auto& reply = replies[static_cast<std::size_t>(r)];
    const auto in = [r](const std::vector<int>& ranks) { return std::ranges::find(ranks, r) != ranks.end(); };
    report.peers.push_back({r, answered[static_cast<std::size_t>(r)],
                            in(silent)   ? "silent"
                            : in(behind) ? "behind"
                            : in(ahead)  ? "ahead"
                                         : "inside",
                            reply.started, reply.finished, reply.idle_s, reply.text});
  }
  IncidentRecorder::write(report);  // abort_all asks the others for theirs
  Runtime::abort_all(summary, kExitHang);
}

}  // namespace mnddp
