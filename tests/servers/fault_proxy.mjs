// A fault-injecting HTTP/1.1 proxy for the object-store tests. It listens on 127.0.0.1 (or the
// address given, e.g. a test cluster's storage address) and forwards every request to an
// upstream server on 127.0.0.1 (Host header and path unchanged, so signatures stay valid) and can
// inject, for requests whose method is in `methods` (default GET) and, when `paths` is set, whose
// path contains that text (e.g. paths=.parquet: data files only):
//   delay_ms=N     wait N ms before forwarding (every request)
//   status503=N    answer the next N requests 503 ServerBusy without forwarding
//   reset=N        for the next N requests, send the headers and half the body, then reset the connection (RST)
//   truncate=N     for the next N requests, send the headers and half the body, then close cleanly (FIN):
//                  the body is shorter than its Content-Length
//   drop=N         for the next N requests, forward (the server acts on them) but reset the connection
//                  instead of answering: a write that committed although the client saw an error
//   p503=P, preset=P  on top of the counts: answer 503 (p503) or reset mid-body (preset) with
//                  probability P (0..1) for every targeted request, for soak runs
//   bytes_per_s=N  cap the response bodies of targeted requests, all connections together, at N bytes
//                  per second, as one network link would: each body is held until the link has carried
//                  it (bodies queue behind each other, first come first served), then sent (0: no cap)
// Control (not forwarded): GET /__fault/set?status503=2&methods=GET  replaces the settings (and
// clears the counts and the log); GET /__fault/stats returns {"forwarded":N,"injected":M,
// "max_in_flight":K} as JSON (K: the most requests the proxy held at once, answered or not);
// GET /__fault/requests returns the requests received since, as a JSON list of "METHOD /path?query"
// followed by " bytes=A-B" for ranged reads (the first 100,000), so tests can check which requests
// an operation makes.
import http from 'node:http';

export function startFaultProxy(upstreamPort, listenHost = '127.0.0.1') {
  let cfg = { delay_ms: 0, status503: 0, reset: 0, truncate: 0, drop: 0, p503: 0, preset: 0, bytes_per_s: 0, methods: ['GET'], paths: '' };
  let linkFreeAt = 0;  // performance.now() when the emulated link has carried every body queued so far
  // Calls send() once the link (bytes_per_s) has carried `bytes` more, at once without a cap.
  function afterLink(targeted, bytes, send) {
    if (!targeted || !(cfg.bytes_per_s > 0)) { send(); return; }
    const now = performance.now();
    linkFreeAt = Math.max(now, linkFreeAt) + (1000 * bytes) / cfg.bytes_per_s;
    setTimeout(send, linkFreeAt - now);
  }
  const stats = { forwarded: 0, injected: 0, max_in_flight: 0 };
  let inFlight = 0;
  let requests = [];
  const agent = new http.Agent({ keepAlive: true });

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://proxy');
    if (url.pathname === '/__fault/set') {
      const q = url.searchParams;
      cfg = {
        delay_ms: Number(q.get('delay_ms') || 0),
        status503: Number(q.get('status503') || 0),
        reset: Number(q.get('reset') || 0),
        truncate: Number(q.get('truncate') || 0),
        drop: Number(q.get('drop') || 0),
        p503: Number(q.get('p503') || 0),
        preset: Number(q.get('preset') || 0),
        bytes_per_s: Number(q.get('bytes_per_s') || 0),
        methods: (q.get('methods') || 'GET').split(','),
        paths: q.get('paths') || '',
      };
      stats.forwarded = 0;
      stats.injected = 0;
      stats.max_in_flight = inFlight;
      requests = [];
      res.end('ok');
      return;
    }
    if (url.pathname === '/__fault/requests') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(requests));
      return;
    }
    inFlight++;
    stats.max_in_flight = Math.max(stats.max_in_flight, inFlight);
    res.on('close', () => { inFlight--; });
    if (requests.length < 100000) {
      const range = req.headers['x-ms-range'] || req.headers.range;
      requests.push(range ? `${req.method} ${req.url} ${range}` : `${req.method} ${req.url}`);
    }
    if (url.pathname === '/__fault/stats') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(stats));
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => setTimeout(() => handle(req, res, Buffer.concat(chunks)), cfg.delay_ms));
  });

  function handle(req, res, body) {
    const path = new URL(req.url, 'http://proxy').pathname;
    const targeted = cfg.methods.includes(req.method) && (!cfg.paths || path.includes(cfg.paths));
    const rate503 = targeted && cfg.p503 > 0 && Math.random() < cfg.p503;
    if (targeted && (cfg.status503 > 0 || rate503)) {
      if (!rate503) cfg.status503--;
      stats.injected++;
      const xml = '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>injected by fault_proxy</Message></Error>';
      res.writeHead(503, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(xml) });
      res.end(xml);
      return;
    }
    let fault = null;
    if (targeted && cfg.reset > 0) { cfg.reset--; fault = 'reset'; }
    else if (targeted && cfg.truncate > 0) { cfg.truncate--; fault = 'truncate'; }
    else if (targeted && cfg.drop > 0) { cfg.drop--; fault = 'drop'; }
    else if (targeted && cfg.preset > 0 && Math.random() < cfg.preset) fault = 'reset';
    const up = http.request({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url,
      headers: req.headers, agent }, (ur) => {
      const parts = [];
      ur.on('data', (c) => parts.push(c));
      ur.on('end', () => {
        const data = Buffer.concat(parts);
        const headers = { ...ur.headers };
        delete headers['transfer-encoding'];
        if (req.method !== 'HEAD') headers['content-length'] = String(data.length);
        if (fault === 'drop') {
          stats.injected++;
          res.socket.resetAndDestroy();
          return;
        }
        if (fault && data.length > 1) {
          stats.injected++;
          res.writeHead(ur.statusCode, headers);
          res.write(data.subarray(0, data.length >> 1), () => {
            if (fault === 'reset') res.socket.resetAndDestroy();
            else res.socket.end();
          });
          return;
        }
        stats.forwarded++;
        afterLink(targeted, data.length, () => {
          res.writeHead(ur.statusCode, headers);
          res.end(data);
        });
      });
    });
    up.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
    up.end(body);
  }

  return new Promise((resolve) => server.listen(0, listenHost, () => resolve(server)));
}
