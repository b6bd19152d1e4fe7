#!/usr/bin/env node
// Calls a Forethought scheduler from Node.js: lists its workers, then streams one Generate.
//
//   node client.js [ADDRESS] [PROMPT]
//
// ADDRESS defaults to $FORETHOUGHT_SCHEDULER, then localhost:50051; the model is $FORETHOUGHT_MODEL,
// then SmolLM2-135M-Instruct. Exits 1 with the gRPC status on stderr when a call fails.
'use strict';

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTOS = path.resolve(__dirname, '..', '..', 'protos');
const address = process.argv[2] || process.env.FORETHOUGHT_SCHEDULER || 'localhost:50051';
const prompt = process.argv[3] || 'The capital of France is';
const model = process.env.FORETHOUGHT_MODEL || 'SmolLM2-135M-Instruct';
const DEADLINE_S = 60;

// keepCase: fields keep their proto names (max_tokens, not maxTokens), as in grpcurl's JSON.
// google/protobuf/*.proto (the Timestamp scheduler.proto imports) are built into proto-loader.
const definition = protoLoader.loadSync('forethought/v1/scheduler.proto', {
  includeDirs: [PROTOS],
  keepCase: true,
  enums: String,
  longs: String,
  defaults: true,
  oneofs: true,
});
const { SchedulerService } = grpc.loadPackageDefinition(definition).forethought.v1;

function deadline() {
  return new Date(Date.now() + DEADLINE_S * 1000);
}

function listWorkers(client) {
  return new Promise((resolve, reject) => {
    client.ListWorkers({}, { deadline: deadline() }, (error, reply) => (error ? reject(error) : resolve(reply.workers)));
  });
}

// Writes the text as it streams; resolves with the last message (finish reason and usage).
function generate(client, request) {
  return new Promise((resolve, reject) => {
    const call = client.Generate(request, { deadline: deadline() });
    let last = null;
    call.on('data', (reply) => {
      if (reply.worker_id) console.log(`[served by ${reply.worker_id}]`);
      process.stdout.write(reply.text);
      last = reply;
    });
    call.on('error', reject);
    call.on('end', () => resolve(last));
  });
}

async function main() {
  const client = new SchedulerService(address, grpc.credentials.createInsecure());
  try {
    const workers = await listWorkers(client);
    for (const worker of workers) {
      console.log(`worker ${worker.worker_id} at ${worker.address}: ${worker.model}, engine ${worker.engine}, ${worker.health}`);
    }
    const last = await generate(client, { model, text: prompt, max_tokens: 16, return_text: true });
    const usage = last.usage;
    console.log(`\nfinish: ${last.finish_reason}; usage: ${usage.prompt_tokens} prompt tokens `
      + `(${usage.cached_prompt_tokens} cached), ${usage.output_tokens} output tokens`);
  } finally {
    client.close();
  }
}

main().catch((error) => {
  const code = error.code === undefined ? 'no status' : `${grpc.status[error.code]} (${error.code})`;
  console.error(`error: ${code}: ${error.details || error.message}`);
  process.exitCode = 1;
});
