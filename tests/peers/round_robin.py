"""A load balancer without stickiness, as an httpx2 transport for the test clients: each
request goes to the next replica in turn, whatever its URL says."""
import httpx2


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next of `replicas` (HOST:PORT); counts them in `sent`."""

    def __init__(self, replicas, sent):
        self.replicas = replicas
        self.sent = sent
        self.next = 0
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        host, port = self.replicas[self.next % len(self.replicas)].rsplit(":", 1)
        self.next += 1
        request.url = request.url.copy_with(host=host, port=int(port))
        request.headers["host"] = f"{host}:{port}"
        self.sent[f"{host}:{port}"] = self.sent.get(f"{host}:{port}", 0) + 1
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()
