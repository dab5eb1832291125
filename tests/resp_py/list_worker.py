"""A list worker written for Redis, as such workers are written (LPUSH
producers, BRPOP consumers): it knows nothing of hotq. tests/resp_py runs
it unchanged against the daemon's RESP listener.

    python list_worker.py HOST PORT QUEUE COUNT

pops COUNT items with BRPOP and prints each on its own line."""

import sys

import redis


def main() -> None:
    host, port, key, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    r = redis.Redis(host=host, port=port)
    for _ in range(count):
        popped = r.brpop(key, timeout=0)
        assert popped is not None
        _, item = popped
        print(item.decode(), flush=True)


if __name__ == "__main__":
    main()
