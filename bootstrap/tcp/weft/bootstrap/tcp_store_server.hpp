// weft/bootstrap/tcp_store_server.hpp — the key-value store rank 0 serves over TCP (Boost.Asio),
// on a background thread for the life of the job. The protocol: weft/bootstrap/tcp_store.hpp.
#pragma once

#include "weft/bootstrap/tcp_store_protocol.hpp"

#include <boost/asio/post.hpp>

#include <sys/resource.h>

#include <future>

namespace weft::bootstrap {

// The server: rank 0 starts it before anything else and keeps it until the job ends.
class tcp_store_server {
 public:
  // Listens on `address` (port 0 picks a free one; see port()). Clients must present `secret`.
  tcp_store_server(const std::string& address, unsigned short port, std::string secret)
      : secret_(std::move(secret)), acceptor_(io_) {
    // Each rank keeps up to three connections here (its own, its failure watch's, its lifeline):
    // the process may open as many descriptors as its hard limit allows, not the soft 1024.
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      static_cast<void>(::setrlimit(RLIMIT_NOFILE, &files));
    }
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
    // A forked child's copy: the thread and the listening socket are the parent's.
    if (owner_.forked()) {
      io_.notify_fork(store_detail::asio::execution_context::fork_child);
      thread_.detach();
      return;
    }
    say_goodbye();
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
    std::string on_close;      // key '\0' value: claimed when this connection ends (op 4)
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
          if (secret_bytes > max_secret_bytes) return client->drop("oversized secret");
          client->body.resize(secret_bytes);
          store_detail::asio::async_read(
              client->socket, store_detail::asio::buffer(client->body),
              [this, client](boost::system::error_code failure2, std::size_t) {
                if (failure2) return client->drop("closed during the hello: " + failure2.message());
                const std::string_view offered(reinterpret_cast<const char*>(client->body.data()),
                                               client->body.size());
                if (!same_secret(offered, secret_))
                  return client->drop(
                      "wrong secret: another job's rank, or a different WEFT_SECRET");
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
          if (op < 1 || op > 6 || key_bytes == 0 || key_bytes > max_key_bytes ||
              value_bytes > max_value_bytes || ((op == 2 || op == 6) && value_bytes != 0)) {
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
                } else if (op == 6) {  // look: unset, said at once
                  std::vector<std::byte> reply(4);
                  store_detail::put32(reply.data(), store_detail::absent);
                  respond(client, std::move(reply));
                } else {
                  park(client, key);
                }
              });
        });
  }

  // Closing in order: every get still waiting is told so (protocol: tcp_store.hpp), that its
  // rank may tell the end of the job from the failure of rank 0; waits for those answers to
  // be written, for a second at most.
  void say_goodbye() {
    auto written = std::make_shared<std::promise<void>>();
    auto finished = written->get_future();
    store_detail::asio::post(io_, [this, written] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      auto outstanding = std::make_shared<std::size_t>(0);
      for (auto& [key, waiting] : waiters_) {
        for (auto& waiter : waiting) {
          if (waiter->closed) continue;
          waiter->parked = 0;
          waiter->reply.resize(4);
          store_detail::put32(waiter->reply.data(), store_detail::closing);
          ++*outstanding;
          store_detail::asio::async_write(
              waiter->socket, store_detail::asio::buffer(waiter->reply),
              [waiter, outstanding, written](boost::system::error_code, std::size_t) {
                if (--*outstanding == 0) written->set_value();
              });
        }
      }
      waiters_.clear();
      if (*outstanding == 0) written->set_value();
    });
    finished.wait_for(std::chrono::seconds(1));
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
        store_detail::tcp::socket::wait_read,
        [this, client, which](boost::system::error_code failure) {
          if (failure || client->closed || client->parked != which) return;  // answered meanwhile
          std::byte peeked;
          const auto got =
              ::recv(client->socket.native_handle(), &peeked, 1, MSG_PEEK | MSG_DONTWAIT);
          if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return watch_parked(client, which);
          client->drop(got == 0 ? "closed while waiting for a key"
                       : got < 0
                           ? std::string("failed while waiting for a key: ") + std::strerror(errno)
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

}  // namespace weft::bootstrap
