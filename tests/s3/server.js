// A real S3-compatible server for the backup store's tests (tests/integration/test-backups.sh):
// @20minutes/s3rver, which checks SigV4 signatures (account S3RVER / S3RVER), on 127.0.0.1
// and an ephemeral port, one bucket. Prints "listening PORT" once it serves.
//   node server.js DIRECTORY BUCKET
'use strict';
const S3rver = require('@20minutes/s3rver');

const [directory, bucket] = process.argv.slice(2);
if (!directory || !bucket) {
  console.error('usage: node server.js DIRECTORY BUCKET');
  process.exit(2);
}
new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: true,
  directory,
  vhostBuckets: false,
  configureBuckets: [{ name: bucket, configs: [] }],
})
  .run()
  .then((addr) => console.log(`listening ${addr.port}`))
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
