"""The TypeScript, Go and Java SDKs, each installed as a tenant would and used
from a project of the tenant's own, outside the tree, against a real
`tickwheel dev` (whose built-in worker serves the `echo` handler).

- TypeScript: `npm pack` of a copy of sdk/typescript (its `prepack` builds
  `dist/`), the tarball's files checked, `npm install` of it into a scratch
  project, a consumer type-checked by `tsc` against the package's `.d.ts` and
  run by node.
- Go: a scratch module requiring the SDK's module path with a `replace` to
  sdk/go, `go mod tidy`, `go build` and `go run`.
- Java: `mvn install` of sdk/java (on the SDK's build folder of the run,
  tests/support/java.py: the classes test_sdk_java.py compiled are not
  compiled again, the jar is made afresh), a scratch Maven project
  depending on the installed coordinates, compiled and run on the class path
  Maven resolves.

Each consumer creates a one-off job, reads it back and waits for it to
succeed, printing one JSON object; the Python client then reads the job it
wrote. The toolchain caches are the ones the other SDK tests use (the npm
cache, the Go module cache, ~/.m2); nothing is written into the tree but
the Java SDK's build folder (git ignores it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.integration.test_sdk_go import GO
from tests.integration.test_sdk_go import dev  # noqa: F401 (the fixture, shared)
from tests.integration.test_sdk_java import JAVA
from tests.support.java import MVN, SDK_BUILD, build_lock
from tests.support.java import mvn as sdk_mvn
from tests.support.server import REPO
from tickwheel import Client
from tickwheel.v1 import job_pb2

pytestmark = pytest.mark.slow

NPM = shutil.which("npm") or "/usr/bin/npm"
NODE = shutil.which("node") or "/usr/bin/node"
TIMEOUT = 900

TS_SDK = REPO / "sdk" / "typescript"
TSC = TS_SDK / "node_modules" / "typescript" / "bin" / "tsc"
TS_CONSUMER = """\
import { ExecutionStatus, TickwheelClient, onceJob } from "@tickwheel/sdk";

const [address, apiKey, name] = process.argv.slice(2) as [string, string, string];
const client = new TickwheelClient({ address, apiKey });
try {
  const at = new Date(Date.now() + 1000);
  const { job } = await client.createJob(onceJob(name, at, { handler: "echo", payload: '{"from":"npm"}' }));
  const read = await client.getJob(job!.id);
  let status = "NOT_SUCCEEDED";
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    const { executions } = await client.listExecutions(job!.id);
    if (executions.some((e) => e.status === ExecutionStatus.SUCCEEDED)) {
      status = "SUCCEEDED";
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  console.log(JSON.stringify({ job_id: read.job!.id, name: read.job!.name, status }));
  if (status !== "SUCCEEDED") process.exitCode = 1;
} finally {
  client.close();
}
"""
TS_MISTYPED = """\
import { onceJob } from "@tickwheel/sdk";

onceJob("mistyped", new Date(), { handler: 42 });
"""

GO_SDK = REPO / "sdk" / "go"
GO_CONSUMER = """\
package main

import (
	"context"
	"encoding/json"
	"os"
	"time"

	tickwheelv1 "github.com/tickwheel/tickwheel/sdk/go/gen/tickwheel/v1"
	"github.com/tickwheel/tickwheel/sdk/go/tickwheel"
)

func main() {
	address, apiKey, name := os.Args[1], os.Args[2], os.Args[3]
	client, err := tickwheel.New(address, tickwheel.WithAPIKey(apiKey))
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()
	job := tickwheel.OnceJob(name, time.Now().Add(time.Second), tickwheel.Handler("echo"),
		tickwheel.Payload([]byte(`{"from":"go"}`)))
	created, err := client.CreateJob(ctx, &tickwheelv1.CreateJobRequest{Job: job})
	if err != nil {
		panic(err)
	}
	read, err := client.GetJob(ctx, &tickwheelv1.GetJobRequest{Id: created.GetJob().GetId()})
	if err != nil {
		panic(err)
	}
	status := "NOT_SUCCEEDED"
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && status != "SUCCEEDED"; {
		listed, err := client.ListExecutions(ctx, &tickwheelv1.ListExecutionsRequest{JobId: read.GetJob().GetId()})
		if err != nil {
			panic(err)
		}
		for _, execution := range listed.GetExecutions() {
			if execution.GetStatus() == tickwheelv1.ExecutionStatus_EXECUTION_STATUS_SUCCEEDED {
				status = "SUCCEEDED"
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]string{
		"job_id": read.GetJob().GetId(), "name": read.GetJob().GetName(), "status": status,
	})
	if status != "SUCCEEDED" {
		os.Exit(1)
	}
}
"""

JAVA_CONSUMER = """\
package example.consumer;

import com.google.protobuf.ByteString;
import dev.tickwheel.Jobs;
import dev.tickwheel.TickwheelClient;
import dev.tickwheel.v1.Execution;
import dev.tickwheel.v1.ExecutionStatus;
import dev.tickwheel.v1.Job;
import java.time.Instant;

public final class Consumer {
  public static void main(String[] args) throws InterruptedException {
    try (TickwheelClient client = TickwheelClient.builder(args[0]).apiKey(args[1]).build()) {
      Job job = Jobs.once(args[2], Instant.now().plusSeconds(1), Jobs.handler("echo"))
          .setPayload(ByteString.copyFromUtf8("{\\"from\\":\\"maven\\"}"))
          .build();
      Job read = client.getJob(client.createJob(job).getJob().getId()).getJob();
      String status = "NOT_SUCCEEDED";
      for (long deadline = System.nanoTime() + 60_000_000_000L; System.nanoTime() < deadline; Thread.sleep(300)) {
        for (Execution execution : client.executions(read.getId())) {
          if (execution.getStatus() == ExecutionStatus.EXECUTION_STATUS_SUCCEEDED) {
            status = "SUCCEEDED";
          }
        }
        if (status.equals("SUCCEEDED")) {
          break;
        }
      }
      System.out.println("{\\"job_id\\":\\"" + read.getId() + "\\",\\"name\\":\\"" + read.getName()
          + "\\",\\"status\\":\\"" + status + "\\"}");
      if (!status.equals("SUCCEEDED")) {
        System.exit(1);
      }
    }
  }
}
"""


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, **(env or {})})  # fmt: skip
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done


def _check_the_job_it_wrote(dev: dict[str, str], printed: str, name: str, payload: bytes) -> None:
    """The consumer's JSON line says its job succeeded; the Python client reads that job back."""
    ran = json.loads(printed.strip().splitlines()[-1])
    assert ran["name"] == name and ran["status"] == "SUCCEEDED", ran
    with Client(dev["address"], api_key=dev["api_key"]) as client:
        job = client.get_job(ran["job_id"]).job
        runs = list(client.iter_executions(job.id))
    assert job.name == name and job.target.handler.name == "echo" and job.payload == payload
    assert [run.status for run in runs] == [job_pb2.EXECUTION_STATUS_SUCCEEDED]


def test_the_npm_tarball_installs_into_a_project_of_its_own_and_runs_a_job(dev, tmp_path: Path) -> None:
    # A copy without dist/: the tarball is what `npm pack` builds from sources.
    source = tmp_path / "sdk"
    shutil.copytree(TS_SDK, source, ignore=shutil.ignore_patterns("node_modules", "dist"))
    (source / "node_modules").symlink_to(TS_SDK / "node_modules")
    packed = _run(NPM, "pack", "--json", "--pack-destination", tmp_path, cwd=source)
    [described] = json.loads(packed.stdout)
    tarball = tmp_path / described["filename"]
    assert tarball.name == "tickwheel-sdk-0.1.0.tgz"
    with tarfile.open(tarball) as archive:
        files = {name.removeprefix("package/") for name in archive.getnames()}
        manifest = json.load(archive.extractfile("package/package.json"))
    assert {"package.json", "README.md", "dist/src/index.js", "dist/src/index.d.ts", "dist/src/gen/tickwheel/v1/job_pb.js",
            "src/index.ts"} <= files, sorted(files)  # fmt: skip
    # Only what a consumer needs: no tests, examples, node_modules or build config.
    assert all(name.split("/")[0] in {"package.json", "README.md", "src", "dist"} for name in files), sorted(files)
    assert all(name.startswith("dist/src/") for name in files if name.startswith("dist/")), sorted(files)
    assert "private" not in manifest and manifest["name"] == "@tickwheel/sdk"

    project = tmp_path / "consumer"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "consumer", "private": True, "type": "module"}))
    _run(NPM, "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball, cwd=project)
    assert not (project / "node_modules" / "@tickwheel" / "sdk").is_symlink(), "installed from the tarball, not linked"
    compiler = {
        "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": True,
        "skipLibCheck": False, "types": ["node"], "typeRoots": [str(TS_SDK / "node_modules" / "@types")],
    }  # fmt: skip
    (project / "tsconfig.json").write_text(json.dumps({"compilerOptions": compiler, "files": ["consumer.ts"]}))
    (project / "consumer.ts").write_text(TS_CONSUMER)
    _run(NODE, TSC, "-p", project, cwd=project)
    # The package's types are real: a handler that is not a string is refused.
    (project / "tsconfig.mistyped.json").write_text(json.dumps({"extends": "./tsconfig.json", "files": ["mistyped.ts"],
                                                                "compilerOptions": {"noEmit": True}}))  # fmt: skip
    (project / "mistyped.ts").write_text(TS_MISTYPED)
    mistyped = subprocess.run([NODE, str(TSC), "-p", str(project / "tsconfig.mistyped.json")], cwd=project,
                              capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert mistyped.returncode != 0 and "mistyped.ts(3,35): error TS2322" in mistyped.stdout, mistyped.stdout

    name = f"npm-{uuid.uuid4().hex[:8]}"
    ran = _run(NODE, project / "consumer.js", dev["address"], dev["api_key"], name, cwd=project)
    _check_the_job_it_wrote(dev, ran.stdout, name, b'{"from":"npm"}')


def test_the_go_module_builds_and_runs_from_a_module_of_its_own(dev, tmp_path: Path) -> None:
    module = (GO_SDK / "go.mod").read_text().splitlines()[0].removeprefix("module ").strip()
    assert module == "github.com/tickwheel/tickwheel/sdk/go"
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "go.mod").write_text(
        f"module example.com/consumer\n\ngo 1.26.0\n\nrequire {module} v0.0.0\n\nreplace {module} => {GO_SDK}\n"
    )
    (project / "main.go").write_text(GO_CONSUMER)
    # GOTOOLCHAIN=local: this machine's Go, never another one fetched here.
    env = {"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    _run(GO, "mod", "tidy", cwd=project, env=env)
    assert f"replace {module} => {GO_SDK}" in (project / "go.mod").read_text()
    _run(GO, "build", "-o", tmp_path / "consumer-program", ".", cwd=project, env=env)
    name = f"go-{uuid.uuid4().hex[:8]}"
    ran = _run(GO, "run", ".", dev["address"], dev["api_key"], name, cwd=project, env=env)
    _check_the_job_it_wrote(dev, ran.stdout, name, b'{"from":"go"}')


def _consumer_pom(coordinates: dict[str, str]) -> str:
    """A Maven project depending on the SDK's coordinates; the plugins at the
    versions sdk/java/pom.xml pins, so they come from the same cache."""
    plugins = "".join(
        f"<plugin><groupId>org.apache.maven.plugins</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></plugin>"
        for artifact, version in (("maven-resources-plugin", "3.3.1"), ("maven-compiler-plugin", "3.14.0"),
                                  ("maven-dependency-plugin", "3.8.1"))
    )  # fmt: skip
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>consumer</artifactId>
  <version>1</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>17</maven.compiler.release>
  </properties>
  <dependencies>
    <dependency>
      <groupId>{coordinates["groupId"]}</groupId>
      <artifactId>{coordinates["artifactId"]}</artifactId>
      <version>{coordinates["version"]}</version>
    </dependency>
  </dependencies>
  <build><plugins>{plugins}</plugins></build>
</project>
"""


def test_the_maven_artifact_installs_and_a_project_of_its_own_compiles_and_runs(dev, tmp_path: Path) -> None:
    maven = (MVN, "-q", "-B", "-Dstyle.color=never")
    with build_lock():  # no jar of an earlier run (or version) left to find
        for old in SDK_BUILD.glob("tickwheel-sdk-*.jar"):
            old.unlink()
    # The SDK's own tests are test_sdk_java.py's; here only the artifact.
    installed = sdk_mvn("-Dmaven.test.skip=true", "install", timeout=TIMEOUT)
    assert installed.returncode == 0, f"mvn install:\n{installed.stdout}\n{installed.stderr}"
    [jar] = SDK_BUILD.glob("tickwheel-sdk-*.jar")
    with zipfile.ZipFile(jar) as archive:
        classes = archive.namelist()
    assert "dev/tickwheel/worker/Worker.class" in classes and "dev/tickwheel/TickwheelAdminClient.class" in classes
    assert not [name for name in classes if name.startswith("dev/tickwheel/examples/")], "examples stay out of the jar"
    coordinates = {"groupId": "dev.tickwheel", "artifactId": "tickwheel-sdk", "version": jar.stem.removeprefix("tickwheel-sdk-")}

    project = tmp_path / "consumer"
    source = project / "src" / "main" / "java" / "example" / "consumer"
    source.mkdir(parents=True)
    (project / "pom.xml").write_text(_consumer_pom(coordinates))
    (source / "Consumer.java").write_text(JAVA_CONSUMER)
    classpath = tmp_path / "classpath.txt"
    _run(*maven, "compile", "dependency:build-classpath", f"-Dmdep.outputFile={classpath}", "-Dmdep.includeScope=runtime",
         cwd=project)  # fmt: skip
    entries = classpath.read_text().strip().split(os.pathsep)
    # The class path holds the artifact just installed (not one of another run's) and its dependencies.
    [installed] = [Path(entry) for entry in entries if Path(entry).name == jar.name]
    assert installed.read_bytes() == jar.read_bytes(), installed
    assert any(Path(entry).name.startswith("grpc-netty-shaded-") for entry in entries), entries

    name = f"maven-{uuid.uuid4().hex[:8]}"
    ran = _run(JAVA, "-cp", f"{project / 'target' / 'classes'}{os.pathsep}{os.pathsep.join(entries)}",
               "example.consumer.Consumer", dev["address"], dev["api_key"], name, cwd=project)  # fmt: skip
    _check_the_job_it_wrote(dev, ran.stdout, name, b'{"from":"maven"}')
