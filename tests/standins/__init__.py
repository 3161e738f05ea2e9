"""Stand-ins for devices and device tools, used by the project's own tests (see docs/devices.md).

Nothing here is a device: ``fake_adb_server`` plays an adb server plus an Android
device over a local folder, ``sshd`` starts a throwaway OpenSSH server on
127.0.0.1, ``fake_net_run`` mimics qnn-net-run's command line and files with
onnxruntime on the CPU, ``fault_python`` makes the device runner hang or crash
on one case (or lack a runtime), and ``dead_host`` is an ssh device that never answers.
"""
