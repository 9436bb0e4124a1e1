/* epoll and eventfd: Swift's Glibc module leaves out epoll_wait. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
