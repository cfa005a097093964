#include "server/client_socket.h"

#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace lantern::server {
namespace {

// An address as cpp-httplib writes Request::remote_addr / local_addr
// (numeric host) and its port; false for what is not IPv4 or IPv6.
bool host_and_port(const sockaddr_storage& a, socklen_t len, std::string& host, int& port) {
    if (a.ss_family == AF_INET) {
        port = ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    } else if (a.ss_family == AF_INET6) {
        port = ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    } else {
        return false;
    }
    char buf[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) {
        return false;
    }
    host = buf;
    return true;
}

bool is_request_socket(int fd, const httplib::Request& req) {
    sockaddr_storage peer{}, local{};
    socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;  // also: not a socket
    std::string host;
    int port = 0;
    if (!host_and_port(peer, peer_len, host, port) || port != req.remote_port || host != req.remote_addr) return false;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
    return host_and_port(local, local_len, host, port) && port == req.local_port && host == req.local_addr;
}

// The process's open descriptors: from /proc/self/fd where there is one,
// else the first 4,096 numbers.
std::vector<int> open_descriptors() {
    std::vector<int> fds;
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
        fds.push_back(std::atoi(it->path().filename().c_str()));
    }
    if (fds.empty()) {
        for (int fd = 0; fd < 4096; ++fd) fds.push_back(fd);
    }
    return fds;
}

}  // namespace

ClientSocket ClientSocket::of(const httplib::Request& req) {
    if (req.remote_port < 0 || req.local_port < 0) return {};
    for (int fd : open_descriptors()) {
        if (is_request_socket(fd, req)) return ClientSocket(fd);
    }
    return {};
}

bool ClientSocket::gone() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return false;  // nothing to read: still connected
    if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return true;
    // Readable: either data (the client sent more) or the end of the stream.
    char c = 0;
    const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace lantern::server
