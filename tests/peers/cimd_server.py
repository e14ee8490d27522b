"""Serves an OAuth client ID metadata document over HTTPS on 127.0.0.1, for the tests of
Aether's own authorization server: the client's id is the document's URL
(https://127.0.0.1:PORT/client.json), which the authorization server reads to learn the
client's name and redirect URIs. The certificate is made here by `openssl` for 127.0.0.1 and
signed by a CA made here too; the test starts Aether trusting that CA (SSL_CERT_FILE).

usage: cimd_server.py DIR REDIRECT_URI
Prints {"port": PORT, "client_id": URL, "ca": PATH} once listening; serves until stdin closes.
Also serves /other.json (naming another client_id) and /redirect.json (a redirect to
client.json), which the authorization server must refuse."""
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_certificates(folder: str) -> tuple[str, str, str]:
    ca_key, ca = os.path.join(folder, "ca.key"), os.path.join(folder, "ca.pem")
    key, csr, cert = (os.path.join(folder, n) for n in ("server.key", "server.csr", "server.pem"))
    ext = os.path.join(folder, "server.ext")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
        "-days", "2", "-subj", "/CN=aether tests CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
        "-days", "2", "-extfile", ext)
    return ca, key, cert


def main() -> None:
    folder, redirect_uri = sys.argv[1], sys.argv[2]
    ca, key, cert = make_certificates(folder)
    documents: dict[str, dict] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            if self.path == "/redirect.json":
                self.send_response(302)
                self.send_header("location", "/client.json")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            doc = documents.get(self.path)
            body = json.dumps(doc).encode() if doc else b""
            self.send_response(200 if doc else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    client_id = f"https://127.0.0.1:{port}/client.json"
    doc = {
        "client_id": client_id,
        "client_name": "aether-tests metadata client",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    documents["/client.json"] = doc
    documents["/other.json"] = {**doc, "client_id": "https://elsewhere.example/client.json"}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": port, "client_id": client_id, "ca": ca}), flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
