// weft/bootstrap/tcp_store.hpp — the key-value store rank 0 serves over TCP (Boost.Asio).
//
// Rank 0 runs a tcp_store_server on a background thread for the life of the job; every rank
// (rank 0 too) talks to it through a tcp_store client. It is the bootstrap's own root
// (bootstrap/tcp, Meson dependency('weft-bootstrap-tcp')), apart from the core because it needs
// Asio, and apart from every transport so that any of them can meet through it.
//
// Protocol (little-endian), one connection per client, one request at a time:
//   hello   "WEFTSTOR" | u32 version | u32 secret bytes (<= 256) | secret
//           -> u8 1 when accepted; anything else is logged and the connection closed
//   request u8 op | u32 key bytes (1..1024) | u32 value bytes (<= 1 MiB) | key | value
//           op 1 set -> u8 1;  op 2 get -> u32 bytes | value, once the key is set;
//           op 3 claim (set unless set) -> u32 bytes | the value the key holds afterwards;
//           op 4 on close: when this connection ends, claim key with value -> u8 1;
//           op 5 withdraw: cancel any connection's op 4 of this key and value -> u8 1
// A hello must arrive within 5 s of connecting; a request with a bad op or sizes ends the
// connection. At most 4096 clients at once.
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/detail/little_endian.hpp"
#include "weft/detail/owning_process.hpp"
#include "weft/error.hpp"

#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace weft::bootstrap {

namespace store_detail {

namespace asio = boost::asio;
using asio::ip::tcp;

inline constexpr char magic[8] = {'W', 'E', 'F', 'T', 'S', 'T', 'O', 'R'};
inline constexpr std::uint32_t version = 1;
inline constexpr std::size_t max_secret_bytes = 256;
inline constexpr std::size_t max_clients = 4096;
inline constexpr auto hello_time = std::chrono::seconds(5);

using weft::detail::get32;
using weft::detail::put32;

// Compares in time independent of where the first difference is.
inline bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

// Logs the first few rejected connections, then one line per thousand.
class rejection_log {
 public:
  void note(const std::string& who, const std::string& why) {
    const auto n = ++count_;
    if (n <= 10 || n % 1000 == 0) {
      std::fprintf(stderr, "weft: %s dropped a connection %s%s\n", who.c_str(), why.c_str(),
                   n == 10  ? " (further ones are counted, one line per thousand)"
                   : n > 10 ? (" [" + std::to_string(n) + " so far]").c_str()
                            : "");
    }
  }
  std::uint64_t count() const { return count_; }

 private:
  std::atomic<std::uint64_t> count_{0};
};

// Runs io until `done` or the deadline; on the deadline, calls `close` (which closes the socket,
// cancelling what waits on it) and drains the handlers.
template <class Close>
bool run_until(asio::io_context& io, Close close, const bool& done, deadline_clock::time_point deadline) {
  io.restart();
  while (!done && io.run_one_until(deadline) != 0) {
  }
  if (done) return true;
  close();
  io.restart();
  io.run();
  return false;
}

}  // namespace store_detail

// The server: rank 0 starts it before anything else and keeps it until the job ends.
class tcp_store_server {
 public:
  // Listens on `address` (port 0 picks a free one; see port()). Clients must present `secret`.
  tcp_store_server(const std::string& address, unsigned short port, std::string secret)
      : secret_(std::move(secret)), acceptor_(io_) {
    namespace asio = store_detail::asio;
    using store_detail::tcp;
    boost::system::error_code failure;
    const auto ip = asio::ip::make_address(address, failure);
    if (failure)
      throw error(errc::invalid_argument, "tcp store: '" + address + "' is not an IP address");
    const tcp::endpoint where(ip, port);
    acceptor_.open(where.protocol(), failure);
    if (!failure) acceptor_.set_option(asio::socket_base::reuse_address(true), failure);
    if (!failure) acceptor_.bind(where, failure);
    if (!failure) acceptor_.listen(asio::socket_base::max_listen_connections, failure);
    if (failure) {
      throw error(errc::transport, "tcp store: cannot listen on " + address + ":" +
                                       std::to_string(port) + ": " + failure.message());
    }
    port_ = acceptor_.local_endpoint().port();
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  tcp_store_server(const tcp_store_server&) = delete;
  tcp_store_server& operator=(const tcp_store_server&) = delete;
  ~tcp_store_server() {
    if (owner_.forked()) {  // a forked child's copy: the thread and the listening socket are the parent's
      io_.notify_fork(store_detail::asio::execution_context::fork_child);
      thread_.detach();
      return;
    }
    io_.stop();
    thread_.join();
  }

  unsigned short port() const { return port_; }
  std::uint64_t rejected() const { return log_.count(); }

 private:
  struct session : std::enable_shared_from_this<session> {
    session(tcp_store_server& server, store_detail::tcp::socket socket)
        : owner(server), socket(std::move(socket)), timer(server.io_) {}
    tcp_store_server& owner;
    store_detail::tcp::socket socket;
    store_detail::asio::steady_timer timer;
    std::array<std::byte, 16> head{};
    std::vector<std::byte> body;
    std::vector<std::byte> reply;
    std::string peer;
    bool greeted = false;
    bool closed = false;
    std::string on_close;  // key '\0' value: claimed when this connection ends (op 4)
    std::uint64_t parked = 0;  // while a get waits for its key: which wait (see park)

    void drop(const std::string& why) {
      if (closed) return;
      closed = true;
      if (!greeted) owner.log_.note("the store on rank 0", "from " + peer + ": " + why);
      if (!on_close.empty()) {
        owner.lifelines_.erase(on_close);
        const auto zero = on_close.find('\0');
        owner.put(on_close.substr(0, zero), on_close.substr(zero + 1), true);
      }
      boost::system::error_code ignored;
      socket.close(ignored);
      timer.cancel();
      --owner.clients_;
    }
  };

  void accept() {
    acceptor_.async_accept(
        [this](boost::system::error_code failure, store_detail::tcp::socket socket) {
          if (failure == store_detail::asio::error::operation_aborted) return;
          if (!failure) {
            if (clients_ >= store_detail::max_clients) {
              log_.note("the store on rank 0", "(too many clients at once)");
            } else {
              ++clients_;
              auto client = std::make_shared<session>(*this, std::move(socket));
              boost::system::error_code ignored;
              const auto remote = client->socket.remote_endpoint(ignored);
              client->peer = remote.address().to_string() + ":" + std::to_string(remote.port());
              client->socket.set_option(store_detail::tcp::no_delay(true), ignored);
              read_hello(client);
            }
          }
          accept();
        });
  }

  void read_hello(const std::shared_ptr<session>& client) {
    client->timer.expires_after(store_detail::hello_time);
    client->timer.async_wait([client](boost::system::error_code failure) {
      if (!failure && !client->greeted) client->drop("no hello within 5 s");
    });
    store_detail::asio::async_read(
        client->socket, store_detail::asio::buffer(client->head),
        [this, client](boost::system::error_code failure, std::size_t) {
          if (failure) return client->drop("closed during the hello: " + failure.message());
          if (std::memcmp(client->head.data(), store_detail::magic, 8) != 0) {
            return client->drop("not a weft store hello");
          }
          if (store_detail::get32(client->head.data() + 8) != store_detail::version) {
            return client->drop("protocol version " +
                                std::to_string(store_detail::get32(client->head.data() + 8)) +
                                ", this store speaks " + std::to_string(store_detail::version));
          }
          const std::uint32_t secret_bytes = store_detail::get32(client->head.data() + 12);
          if (secret_bytes > store_detail::max_secret_bytes)
            return client->drop("oversized secret");
          client->body.resize(secret_bytes);
          store_detail::asio::async_read(
              client->socket, store_detail::asio::buffer(client->body),
              [this, client](boost::system::error_code failure2, std::size_t) {
                if (failure2) return client->drop("closed during the hello: " + failure2.message());
                const std::string_view offered(reinterpret_cast<const char*>(client->body.data()),
                                               client->body.size());
                if (!store_detail::same_secret(offered, secret_))
                  return client->drop("wrong secret: another job's rank, or a different WEFT_SECRET");
                client->greeted = true;
                client->timer.cancel();
                respond(client, {std::byte{1}});
              });
        });
  }

  void read_request(const std::shared_ptr<session>& client) {
    store_detail::asio::async_read(
        client->socket, store_detail::asio::buffer(client->head.data(), 9),
        [this, client](boost::system::error_code failure, std::size_t) {
          if (failure) return client->drop(failure.message());
          const auto op = std::to_integer<unsigned>(client->head[0]);
          const std::uint32_t key_bytes = store_detail::get32(client->head.data() + 1);
          const std::uint32_t value_bytes = store_detail::get32(client->head.data() + 5);
          if (op < 1 || op > 5 || key_bytes == 0 || key_bytes > max_key_bytes ||
              value_bytes > max_value_bytes || (op == 2 && value_bytes != 0)) {
            return client->drop("malformed request");
          }
          client->body.resize(std::size_t{key_bytes} + value_bytes);
          store_detail::asio::async_read(
              client->socket, store_detail::asio::buffer(client->body),
              [this, client, op, key_bytes](boost::system::error_code failure2, std::size_t) {
                if (failure2) return client->drop(failure2.message());
                const char* text = reinterpret_cast<const char*>(client->body.data());
                std::string key(text, key_bytes);
                std::string value(text + key_bytes, client->body.size() - key_bytes);
                if (op == 1) {
                  put(key, std::move(value), false);
                  respond(client, {std::byte{1}});
                } else if (op == 3) {  // claim: set unless set, answer what it holds
                  answer(client, put(key, std::move(value), true));
                } else if (op == 4) {  // on close: claim key with value when this connection ends
                  client->on_close = key + '\0' + value;
                  lifelines_[client->on_close] = client;
                  respond(client, {std::byte{1}});
                } else if (op == 5) {  // withdraw a connection's op 4, from any connection
                  if (auto found = lifelines_.find(key + '\0' + value); found != lifelines_.end()) {
                    if (auto holder = found->second.lock()) holder->on_close.clear();
                    lifelines_.erase(found);
                  }
                  respond(client, {std::byte{1}});
                } else if (auto found = values_.find(key); found != values_.end()) {
                  answer(client, found->second);
                } else {
                  park(client, key);
                }
              });
        });
  }

  // A get waits for its key. The client sends nothing meanwhile, so the connection is watched
  // for its end (a lifeline's process may die while its watch waits here): readable means
  // closed, or a client that broke the protocol.
  void park(const std::shared_ptr<session>& client, const std::string& key) {
    waiters_[key].push_back(client);
    client->parked = ++parks_;
    watch_parked(client, client->parked);
  }

  void watch_parked(const std::shared_ptr<session>& client, std::uint64_t which) {
    client->socket.async_wait(
        store_detail::tcp::socket::wait_read, [this, client, which](boost::system::error_code failure) {
          if (failure || client->closed || client->parked != which) return;  // answered meanwhile
          std::byte peeked;
          const auto got = ::recv(client->socket.native_handle(), &peeked, 1, MSG_PEEK | MSG_DONTWAIT);
          if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return watch_parked(client, which);
          client->drop(got == 0  ? "closed while waiting for a key"
                       : got < 0 ? std::string("failed while waiting for a key: ") + std::strerror(errno)
                                 : std::string("sent a request while its get waited"));
        });
  }

  // Sets key (unless `only_if_absent` and it is set), answers the gets waiting for it, and
  // returns the value it holds.
  const std::string& put(const std::string& key, std::string value, bool only_if_absent) {
    if (only_if_absent) {
      if (auto held = values_.find(key); held != values_.end()) return held->second;
    }
    const std::string& stored = values_[key] = std::move(value);
    auto waiting = waiters_.extract(key);
    if (!waiting.empty()) {
      for (auto& waiter : waiting.mapped()) {
        waiter->parked = 0;
        if (!waiter->closed) answer(waiter, stored);
      }
    }
    return stored;
  }

  void answer(const std::shared_ptr<session>& client, const std::string& value) {
    std::vector<std::byte> reply(4 + value.size());
    store_detail::put32(reply.data(), static_cast<std::uint32_t>(value.size()));
    std::memcpy(reply.data() + 4, value.data(), value.size());
    respond(client, std::move(reply));
  }

  void respond(const std::shared_ptr<session>& client, std::vector<std::byte> reply) {
    client->reply = std::move(reply);
    store_detail::asio::async_write(client->socket, store_detail::asio::buffer(client->reply),
                                    [this, client](boost::system::error_code failure, std::size_t) {
                                      if (failure) return client->drop(failure.message());
                                      read_request(client);
                                    });
  }

  std::string secret_;
  weft::detail::owning_process owner_;
  store_detail::asio::io_context io_{1};
  store_detail::tcp::acceptor acceptor_;
  std::thread thread_;
  unsigned short port_ = 0;
  std::size_t clients_ = 0;
  store_detail::rejection_log log_;
  std::map<std::string, std::string, std::less<>> values_;
  // Clients waiting for a key; held until it is set (a client that gives up is dropped then).
  std::map<std::string, std::vector<std::shared_ptr<session>>, std::less<>> waiters_;
  std::uint64_t parks_ = 0;
  std::map<std::string, std::weak_ptr<session>> lifelines_;  // op 4's, by key '\0' value
};

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
    if (secret.size() > store_detail::max_secret_bytes) {
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

  // This side's address of the connection to the store: the interface that reaches rank 0.
  std::string local_address() const {
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
        throw error(errc::invalid_argument, "the tcp store's host '" + host_ + "' (WEFT_STORE " + where_ +
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
        if (!store_detail::run_until(io_, [this] { close_socket(); }, done, deadline))
          failure = asio::error::timed_out;
      }
      if (!failure) break;
      last_failure = failure.message();
      close_socket();
      if (deadline_clock::now() + std::chrono::milliseconds(50) >= deadline) {
        if (unresolved) {
          throw error(errc::timeout, "could not resolve the tcp store's host '" + host_ + "' (WEFT_STORE " +
                                         where_ + "): " + last_failure);
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
  std::optional<std::string> value_reply(std::span<const std::byte> out, deadline_clock::time_point deadline) {
    std::byte size_bytes[4];
    if (!exchange(out, {size_bytes, 4}, deadline)) return std::nullopt;
    const std::uint32_t size = store_detail::get32(size_bytes);
    if (size > max_value_bytes)
      throw error(errc::transport, "the tcp store at " + where_ + " sent an oversized value");
    std::string value(size, '\0');
    if (!exchange({}, {reinterpret_cast<std::byte*>(value.data()), size}, deadline)) return std::nullopt;
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
      if (!store_detail::run_until(io_, [this] { close_socket(); }, done, deadline)) return timed_out();
      if (failure) lost(failure);
    }
    if (in.empty()) return true;
    done = false;
    asio::async_read(socket_, asio::buffer(in.data(), in.size()),
                     [&](boost::system::error_code result, std::size_t) {
                       failure = result;
                       done = true;
                     });
    if (!store_detail::run_until(io_, [this] { close_socket(); }, done, deadline)) return timed_out();
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
  std::atomic<bool> interrupted_{false};
  std::mutex handle_guard_;  // interrupt() against closing the socket on the calling thread
  int live_handle_ = -1;     // the connected socket's descriptor, -1 once closed
};

}  // namespace weft::bootstrap
