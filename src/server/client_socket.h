// The socket an HTTP request came on, to ask whether its client is still
// there. cpp-httplib 0.11 (Debian 12's) tells a handler neither its socket
// nor whether the peer closed it, only the connection's addresses, so the
// socket is found by those: the open socket whose local and peer address
// and port are the request's (a TCP connection's four-tuple names one live
// socket).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

namespace httplib {
struct Request;
}

namespace lantern::server {

class ClientSocket {
public:
    ClientSocket() = default;
    // The request's socket; none when it cannot be found (not a TCP
    // socket, or no /proc/self/fd and no match among the first 4,096
    // descriptors), and then gone() is always false.
    static ClientSocket of(const httplib::Request& req);

    bool found() const { return fd_ >= 0; }
    // True once the peer has closed the connection (or it failed); data the
    // client sent ahead (a pipelined request) is left unread. Valid only
    // while the connection is open: from the request's handler, or from
    // callbacks its handler waits on, or its response's content provider
    // runs beside; after that the number may name another socket.
    bool gone() const;

private:
    explicit ClientSocket(int fd) : fd_(fd) {}
    int fd_ = -1;
};

// For a handler that waits for its generations: gone() (for
// GenerationRequest::client_gone) is true once the socket closed or the
// handler left (it answered early, with an error, and nobody reads the
// rest). A check that began just before the handler left can still ask a
// socket number httplib has closed since; asking only peeks, so the worst
// is one wrong answer for a generation nobody waits for.
class ClientWatch {
public:
    explicit ClientWatch(const httplib::Request& req) : state_(std::make_shared<State>(ClientSocket::of(req))) {}
    ~ClientWatch() { state_->left = true; }
    ClientWatch(const ClientWatch&) = delete;
    ClientWatch& operator=(const ClientWatch&) = delete;

    std::function<bool()> gone() const {
        return [s = state_] { return s->left.load() || s->socket.gone(); };
    }

private:
    struct State {
        explicit State(ClientSocket sock) : socket(sock) {}
        ClientSocket socket;
        std::atomic<bool> left{false};
    };
    std::shared_ptr<State> state_;
};

}  // namespace lantern::server
