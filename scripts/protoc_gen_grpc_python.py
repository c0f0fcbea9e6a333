"""protoc plugin adapter: CodeGeneratorRequest in, CodeGeneratorResponse out.

grpcio-tools ships the gRPC Python generator only inside its bundled protoc,
and buf cannot call that as a builtin. This adapter writes the request's
descriptors to a temporary descriptor set, runs the bundled protoc with
``--grpc_python_out`` over it, and returns the files it wrote.
"""

import pathlib
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse()
    response.supported_features = plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = pathlib.Path(tmp)
        descriptor_set = descriptor_pb2.FileDescriptorSet(file=request.proto_file)
        (tmpdir / "in.binpb").write_bytes(descriptor_set.SerializeToString())
        out = tmpdir / "out"
        out.mkdir()
        out_flag = f"--grpc_python_out={request.parameter + ':' if request.parameter else ''}{out}"
        status = protoc.main(
            ["protoc", f"--descriptor_set_in={tmpdir / 'in.binpb'}", out_flag, *request.file_to_generate]
        )
        if status != 0:
            response.error = f"grpc_tools.protoc exited with status {status}"
        else:
            for path in sorted(out.rglob("*.py")):
                generated = response.file.add()
                generated.name = str(path.relative_to(out))
                generated.content = path.read_text()
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
