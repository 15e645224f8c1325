// A real S3-compatible server for the backup store's tests (tests/integration/test-backups.sh):
// @20minutes/s3rver, which checks SigV4 signatures (account S3RVER / S3RVER), on 127.0.0.1
// and an ephemeral port, one bucket. Prints "listening PORT" once it serves.
//   node server.js DIRECTORY BUCKET
'use strict';
const fs = require('fs/promises');
const path = require('path');
const S3rver = require('@20minutes/s3rver');
const router = require('@20minutes/s3rver/lib/routes');

// s3rver 4.0.4 stores multipart uploads (CreateMultipartUpload, UploadPart,
// CompleteMultipartUpload) but has neither AbortMultipartUpload nor ListMultipartUploads.
// Both are added here on its router, right after its signature check (so they are signed
// like every other request): DELETE /bucket/key?uploadId=ID removes the upload's parts
// (204, or 404 NoSuchUpload), GET /bucket?uploads lists the uploads in progress.
router.use('/:bucket/:key*', async (ctx, next) => {
  const uploads = ctx.store.getResourcePath(ctx.params.bucket, undefined, 'uploads');
  if (ctx.method === 'DELETE' && ctx.params.key && 'uploadId' in ctx.query) {
    const id = String(ctx.query.uploadId);
    if (!/^[0-9a-f]+$/.test(id)) {
      ctx.status = 404;
      return;
    }
    try {
      await fs.access(path.join(uploads, id));
    } catch {
      ctx.status = 404;
      ctx.body = { Error: { Code: 'NoSuchUpload', Message: 'The specified upload does not exist.' } };
      return;
    }
    await fs.rm(path.join(uploads, id), { recursive: true, force: true });
    ctx.status = 204;
    return;
  }
  if (ctx.method === 'GET' && !ctx.params.key && 'uploads' in ctx.query) {
    let ids = [];
    try {
      ids = await fs.readdir(uploads);
    } catch {
      ids = [];
    }
    const list = [];
    for (const id of ids) {
      let key = '';
      try {
        key = (await fs.readFile(path.join(uploads, id, 'key'))).toString();
      } catch {
        continue;
      }
      list.push({ Key: key, UploadId: id });
    }
    ctx.body = {
      ListMultipartUploadsResult: {
        '@': { xmlns: 'http://s3.amazonaws.com/doc/2006-03-01/' },
        Bucket: ctx.params.bucket,
        Upload: list,
      },
    };
    return;
  }
  await next();
});
{
  // the layer just added goes right after the authentication layer
  const layer = router.stack.pop();
  const i = router.stack.findIndex((l) => l.stack.some((fn) => fn.name === 'authentication'));
  if (i < 0) throw new Error('s3rver: no authentication layer on its router');
  router.stack.splice(i + 1, 0, layer);
}

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
