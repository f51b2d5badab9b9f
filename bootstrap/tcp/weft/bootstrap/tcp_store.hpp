// weft/bootstrap/tcp_store.hpp — the key-value store rank 0 serves over TCP (Boost.Asio).
//
// Rank 0 runs a tcp_store_server (tcp_store_server.hpp) on a background thread for the life of
// the job; every rank (rank 0 too) talks to it through a tcp_store client (this file). It is the
// bootstrap's own root (bootstrap/tcp, Meson dependency('weft-bootstrap-tcp')), apart from the core
// because it needs Asio, and apart from every transport so that any of them can meet through it.
//
// Protocol (little-endian), one connection per client, one request at a time:
//   hello   "WEFTSTOR" | u32 version | u32 secret bytes (<= 256) | secret
//           -> u8 1 when accepted; anything else is logged and the connection closed
//   request u8 op | u32 key bytes (1..1024) | u32 value bytes (<= 1 MiB) | key | value
//           op 1 set -> u8 1;  op 2 get -> u32 bytes | value, once the key is set;
//           op 3 claim (set unless set) -> u32 bytes | the value the key holds afterwards;
//           op 4 on close: when this connection ends, claim key with value -> u8 1;
//           op 5 withdraw: cancel any connection's op 4 of this key and value -> u8 1;
//           op 6 look -> u32 bytes | value at once, or u32 0xFFFFFFFE (no value) when unset
// When the server closes in order (the job ended on rank 0), every get still waiting is answered
// u32 0xFFFFFFFF (no value follows) before the connection closes; a connection that ends without
// it is a store that failed.
// A hello must arrive within 5 s of connecting; a request with a bad op or sizes ends the
// connection. At most 4096 clients at once.
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/bootstrap/tcp_store_protocol.hpp"
#include "weft/bootstrap/tcp_store_server.hpp"

namespace weft::bootstrap {

// A client of the store. Connects (retrying until `deadline`: rank 0 may start later), then
// serves set and get; used from one thread.
class tcp_store final : public store {
 public:
  tcp_store(const std::string& host, unsigned short port, std::string_view secret,
            deadline_clock::time_point deadline)
      : host_(host),
        port_(port),
        secret_(secret),
        where_(host + ":" + std::to_string(port)),
        socket_(io_) {
    if (secret.size() > max_secret_bytes) {
      throw error(errc::invalid_argument, "WEFT_SECRET is longer than 256 bytes");
    }
    connect(deadline);
  }
  tcp_store(const tcp_store&) = delete;
  tcp_store& operator=(const tcp_store&) = delete;
  ~tcp_store() override {
    // A forked child's copy closes its socket without touching the parent's registration of it.
    if (owner_.forked()) io_.notify_fork(store_detail::asio::execution_context::fork_child);
  }

  void set(std::string_view key, std::string_view value) override {
    acknowledged(1, key, value, "setting '" + std::string(key) + "'");
  }

  std::optional<std::string> get(std::string_view key,
                                 deadline_clock::time_point deadline) override {
    check(key, 0);
    return value_reply(request(2, key, {}), deadline);
  }

  // Without waiting: a get whose deadline has passed would give up on its connection.
  std::optional<std::string> look(std::string_view key) override {
    check(key, 0);
    auto held = value_reply(request(6, key, {}), deadline_clock::now() + answer_time);
    if (!held) {
      throw error(errc::timeout, "the tcp store at " + where_ + " did not answer a look at '" +
                                     std::string(key) + "'");
    }
    if (absent_) return std::nullopt;
    return held;
  }

  std::string claim(std::string_view key, std::string_view value) override {
    check(key, value.size());
    auto held = value_reply(request(3, key, value), deadline_clock::now() + answer_time);
    if (!held) {
      throw error(errc::timeout, "the tcp store at " + where_ + " did not answer a claim of '" +
                                     std::string(key) + "'");
    }
    return *held;
  }

  bool set_on_close(std::string_view key, std::string_view value) override {
    acknowledged(4, key, value, "a close notice");
    return true;
  }

  void withdraw_on_close(std::string_view key, std::string_view value) override {
    acknowledged(5, key, value, "a withdrawal");
  }

  connector_type connector() const override {
    return [host = host_, port = port_, secret = secret_](deadline_clock::time_point deadline) {
      return std::make_unique<tcp_store>(host, port, secret, deadline);
    };
  }

  // From another thread: the call waiting on this connection throws errc::transport; the next
  // call connects again.
  void interrupt() override {
    std::lock_guard guard(handle_guard_);  // the descriptor cannot be closed (and reused) meanwhile
    interrupted_ = true;
    if (live_handle_ >= 0) ::shutdown(live_handle_, SHUT_RDWR);
  }

  std::string describe() const override { return "tcp store at " + where_; }

  bool closed_in_order() const override { return closed_in_order_; }

  // This side's address of the connection to the store: the interface that reaches rank 0.
  std::string local_address() const override {
    boost::system::error_code failure;
    const auto local = socket_.local_endpoint(failure);
    return failure ? std::string("127.0.0.1") : local.address().to_string();
  }

 private:
  static void check(std::string_view key, std::size_t value_bytes) {
    if (key.empty() || key.size() > max_key_bytes || value_bytes > max_value_bytes) {
      throw error(errc::invalid_argument,
                  "tcp store: keys take 1 to 1024 bytes, values up to 1 MiB");
    }
  }

  // Connects (retrying until `deadline`: rank 0 may start later) and says hello.
  void connect(deadline_clock::time_point deadline) {
    namespace asio = store_detail::asio;
    using store_detail::tcp;
    std::string last_failure = "no attempt";
    bool unresolved = false;
    while (true) {
      boost::system::error_code failure;
      tcp::resolver resolver(io_);
      const auto endpoints = resolver.resolve(host_, std::to_string(port_), failure);
      if (failure == asio::error::host_not_found || failure == asio::error::service_not_found) {
        // The name service says the name does not exist: waiting will not change that.
        throw error(errc::invalid_argument, "the tcp store's host '" + host_ + "' (WEFT_STORE " +
                                                where_ +
                                                ") does not resolve: " + failure.message());
      }
      if (failure) {
        unresolved = true;  // the name service did not answer (yet): retried
      } else {
        unresolved = false;
        bool done = false;
        asio::async_connect(socket_, endpoints,
                            [&](boost::system::error_code result, const tcp::endpoint&) {
                              failure = result;
                              done = true;
                            });
        if (!store_detail::run_until(
                io_, [this] { close_socket(); }, done, deadline))
          failure = asio::error::timed_out;
      }
      if (!failure) break;
      last_failure = failure.message();
      close_socket();
      if (deadline_clock::now() + std::chrono::milliseconds(50) >= deadline) {
        if (unresolved) {
          throw error(errc::timeout, "could not resolve the tcp store's host '" + host_ +
                                         "' (WEFT_STORE " + where_ + "): " + last_failure);
        }
        throw error(errc::timeout, "could not reach the tcp store at " + where_ + " (" +
                                       last_failure +
                                       "); rank 0 serves it: has it started, and is WEFT_STORE the "
                                       "same on every rank?");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    {
      std::lock_guard guard(handle_guard_);
      live_handle_ = socket_.native_handle();
    }
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    std::vector<std::byte> hello(16 + secret_.size());
    std::memcpy(hello.data(), store_detail::magic, 8);
    store_detail::put32(hello.data() + 8, store_detail::version);
    store_detail::put32(hello.data() + 12, static_cast<std::uint32_t>(secret_.size()));
    std::memcpy(hello.data() + 16, secret_.data(), secret_.size());
    std::byte accepted{0};
    bool answered = false;
    try {
      answered = exchange(hello, {&accepted, 1}, deadline);
    } catch (const error&) {
      answered = false;  // the store closed the connection: it did not accept the hello
    }
    if (!answered || accepted != std::byte{1}) {
      close_socket();
      throw error(errc::transport,
                  "the tcp store at " + where_ +
                      " refused this rank: it serves another job (WEFT_JOB or the launcher's job "
                      "identity differs), or WEFT_SECRET is not the same on every rank");
    }
    timed_out_ = false;
  }

  // How long a request that the store answers at once may take.
  static constexpr std::chrono::seconds answer_time{60};

  // Sends request `op` and waits for its one-byte acknowledgement.
  void acknowledged(int op, std::string_view key, std::string_view value, const std::string& what) {
    check(key, value.size());
    std::byte ack{0};
    if (!exchange(request(op, key, value), {&ack, 1}, deadline_clock::now() + answer_time)) {
      throw error(errc::timeout, "the tcp store at " + where_ + " did not acknowledge " + what);
    }
  }

  // Sends `out` and reads the value the store answers (u32 bytes | value); nullopt by the deadline.
  std::optional<std::string> value_reply(std::span<const std::byte> out,
                                         deadline_clock::time_point deadline) {
    std::byte size_bytes[4];
    if (!exchange(out, {size_bytes, 4}, deadline)) return std::nullopt;
    const std::uint32_t size = store_detail::get32(size_bytes);
    absent_ = size == store_detail::absent;
    if (absent_) return std::string();
    if (size == store_detail::closing) {
      close_socket();
      closed_in_order_ = true;
      throw error(errc::peer_lost,
                  "the " + describe() + " closed: the job ended on rank 0, which serves it");
    }
    if (size > max_value_bytes)
      throw error(errc::transport, "the tcp store at " + where_ + " sent an oversized value");
    std::string value(size, '\0');
    if (!exchange({}, {reinterpret_cast<std::byte*>(value.data()), size}, deadline))
      return std::nullopt;
    return value;
  }

  static std::vector<std::byte> request(int op, std::string_view key, std::string_view value) {
    std::vector<std::byte> out(9 + key.size() + value.size());
    out[0] = static_cast<std::byte>(op);
    store_detail::put32(out.data() + 1, static_cast<std::uint32_t>(key.size()));
    store_detail::put32(out.data() + 5, static_cast<std::uint32_t>(value.size()));
    std::memcpy(out.data() + 9, key.data(), key.size());
    if (!value.empty()) std::memcpy(out.data() + 9 + key.size(), value.data(), value.size());
    return out;
  }

  // Writes `out`, then reads exactly `in.size()` bytes, by the deadline. After a failure the
  // connection is closed and every later call fails.
  bool exchange(std::span<const std::byte> out, std::span<std::byte> in,
                deadline_clock::time_point deadline) {
    namespace asio = store_detail::asio;
    if (!socket_.is_open()) {
      // After a timed-out get, the answer may still come on the old connection: use a new one.
      if (!timed_out_)
        throw error(errc::transport, "the connection to the " + describe() + " failed earlier");
      connect(deadline);
    }
    boost::system::error_code failure;
    bool done = false;
    if (!out.empty()) {
      asio::async_write(socket_, asio::buffer(out.data(), out.size()),
                        [&](boost::system::error_code result, std::size_t) {
                          failure = result;
                          done = true;
                        });
      if (!store_detail::run_until(
              io_, [this] { close_socket(); }, done, deadline))
        return timed_out();
      if (failure) lost(failure);
    }
    if (in.empty()) return true;
    done = false;
    asio::async_read(socket_, asio::buffer(in.data(), in.size()),
                     [&](boost::system::error_code result, std::size_t) {
                       failure = result;
                       done = true;
                     });
    if (!store_detail::run_until(
            io_, [this] { close_socket(); }, done, deadline))
      return timed_out();
    if (failure) lost(failure);
    return true;
  }

  bool timed_out() {
    timed_out_ = true;  // run_until closed the socket
    return false;
  }

  // Closes the connection; interrupt() no longer touches its descriptor.
  void close_socket() {
    std::lock_guard guard(handle_guard_);
    live_handle_ = -1;
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  [[noreturn]] void lost(const boost::system::error_code& failure) {
    close_socket();
    if (interrupted_.exchange(false)) {
      timed_out_ = true;  // the store is fine: the next call connects again
      throw error(errc::transport, "a wait on the " + describe() + " was interrupted");
    }
    throw error(errc::peer_lost, "lost the connection to the " + describe() + " (" +
                                     failure.message() +
                                     "): rank 0, which serves it, may have failed");
  }

  std::string host_;
  unsigned short port_;
  std::string secret_;
  std::string where_;
  weft::detail::owning_process owner_;
  store_detail::asio::io_context io_{1};
  store_detail::tcp::socket socket_;
  bool timed_out_ = false;
  bool closed_in_order_ = false;
  bool absent_ = false;  // the last value_reply's key was unset (op 6)
  std::atomic<bool> interrupted_{false};
  std::mutex handle_guard_;  // interrupt() against closing the socket on the calling thread
  int live_handle_ = -1;     // the connected socket's descriptor, -1 once closed
};

}  // namespace weft::bootstrap
