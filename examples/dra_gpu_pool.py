"""Write a DRA snapshot for measuring: NODES nodes of 8 GPUs (two NVLink domains of 4), and PODS
pods each asking for 1, 2, 4 or 8 GPUs through claim templates (2 and 4 within one domain).

    python examples/dra_gpu_pool.py 125 400 > /tmp/dra-125x8.yaml
    cpsat-scheduler schedule --engine greedy -o json /tmp/dra-125x8.yaml
"""
import random
import sys

import yaml

nodes, pods = (int(a) for a in sys.argv[1:3])
random.seed(1)
items = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
          "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com" && '
                                          'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}}]}}]
for n in range(nodes):
    node = f"n{n}"
    items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                  "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}})
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
                  "spec": {"driver": "gpu.example.com", "nodeName": node,
                           "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                           "devices": [{"name": f"gpu-{i}", "attributes": {"nvlink": {"int": i // 4}},
                                        "capacity": {"memory": {"value": "80Gi"}}} for i in range(8)]}})
for c in (1, 2, 4, 8):
    request = {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": c}}
    constraints = [{"matchAttribute": "gpu.example.com/nvlink"}] if c in (2, 4) else []
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": f"g{c}", "namespace": "ml"},
                  "spec": {"spec": {"devices": {"requests": [request], "constraints": constraints}}}})
for i in range(pods):
    c = random.choice((1, 1, 2, 2, 4, 8))
    items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ml"},
                  "spec": {"schedulerName": "cpsat-scheduler",
                           "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": f"g{c}"}],
                           "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"},
                                                                          "claims": [{"name": "gpus"}]}}]}})
yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
