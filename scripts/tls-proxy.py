#!/usr/bin/env python3
"""A TLS terminator for the benchmark: listens with TLS on 127.0.0.1:PORT and
forwards each connection, in plain TCP, to UPSTREAM (host:port), so that the
projector reaches DynamoDB Local through TLS as it reaches DynamoDB on AWS.

    scripts/tls-proxy.py PORT UPSTREAM CERT KEY

With CERT and KEY given as `-` it listens in plain TCP: the same hop without
TLS, so that a run through it beside a run through TLS tells what TLS itself
costs. Runs until killed. Standard library only.
"""
import socket
import ssl
import sys
import threading


def pump(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(raw, context, upstream):
    # The handshake runs in the connection's own thread, as a server's do: in
    # the accept loop, a function's concurrent first connections would wait
    # for each other's handshakes, and the figure would be this proxy's.
    try:
        client = context.wrap_socket(raw, server_side=True) if context else raw
    except (ssl.SSLError, OSError):
        raw.close()
        return
    host, port = upstream.rsplit(":", 1)
    try:
        server = socket.create_connection((host, int(port)))
    except OSError:
        client.close()
        return
    # Small writes go out at once: with Nagle's algorithm and delayed ACKs
    # each request would wait some 40 ms.
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(client, server), daemon=True).start()
    pump(server, client)


def main():
    port, upstream, cert, key = sys.argv[1:5]
    context = None
    if (cert, key) != ("-", "-"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)
    while True:
        raw, _ = listener.accept()
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(raw, context, upstream), daemon=True).start()


if __name__ == "__main__":
    main()
