// The app under load: reads the body, answers a small JSON document.
import { createServer } from 'node:http';

const port = Number(process.argv[2] ?? 0);
const server = createServer((req, res) => {
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
  });
  req.on('end', () => {
    const body = `{"ok":true,"received":${size}}`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(port, '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
