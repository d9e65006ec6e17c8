"""Ask the Vulkan loader itself which devices it offers: `python probe.py` prints one JSON object.

Standard library only (ctypes on libvulkan.so.1), so it runs in any interpreter and needs no
`vulkaninfo`. It creates an instance under the caller's environment, so VK_INSTANCE_LAYERS and
VK_LAYER_PATH (RSI's layer for lavapipe) apply to what it reports, as they do for SAPIEN.
"""

from __future__ import annotations

import ctypes
import json
import sys

DEVICE_TYPES = {0: "other", 1: "integrated_gpu", 2: "discrete_gpu", 3: "virtual_gpu", 4: "cpu"}
EXTERNAL_FD = ("VK_KHR_external_semaphore_fd", "VK_KHR_external_fence_fd")
RAY_TRACING = "VK_KHR_ray_tracing_pipeline"
STRUCTURE_TYPE_APPLICATION_INFO = 0
STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 = 1000059001
STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES = 1000196000
API_VERSION_1_2 = (1 << 22) | (2 << 12)
PROPERTIES_SIZE = 4096  # VkPhysicalDeviceProperties is under 1 KiB; read its head by offset
NAME_SIZE = 256


class ApplicationInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    ]


class InstanceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(ApplicationInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


class DriverProperties(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("driverID", ctypes.c_int),
        ("driverName", ctypes.c_char * NAME_SIZE),
        ("driverInfo", ctypes.c_char * NAME_SIZE),
        ("conformanceVersion", ctypes.c_uint8 * 4),
    ]


class Properties2(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("properties", ctypes.c_uint8 * PROPERTIES_SIZE)]


class ExtensionProperties(ctypes.Structure):
    _fields_ = [("extensionName", ctypes.c_char * NAME_SIZE), ("specVersion", ctypes.c_uint32)]


def _device(vk, handle: ctypes.c_void_p) -> dict:
    driver = DriverProperties(sType=STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES)
    properties = Properties2(sType=STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=ctypes.addressof(driver))
    vk.vkGetPhysicalDeviceProperties2(handle, ctypes.byref(properties))
    head = bytes(properties.properties)
    api, _, vendor, _, kind = (int.from_bytes(head[i : i + 4], "little") for i in range(0, 20, 4))
    name = head[20 : 20 + NAME_SIZE].split(b"\0", 1)[0].decode(errors="replace")
    count = ctypes.c_uint32()
    vk.vkEnumerateDeviceExtensionProperties(handle, None, ctypes.byref(count), None)
    extensions = (ExtensionProperties * count.value)()
    vk.vkEnumerateDeviceExtensionProperties(handle, None, ctypes.byref(count), extensions)
    names = {e.extensionName.decode() for e in extensions[: count.value]}
    return {
        "name": name,
        "type": DEVICE_TYPES.get(kind, str(kind)),
        "driver": driver.driverName.decode(errors="replace"),
        "vendor_id": vendor,
        "api_version": f"{api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}",
        "external_fd": all(x in names for x in EXTERNAL_FD),
        "ray_tracing": RAY_TRACING in names,
    }


def probe() -> dict:
    try:
        vk = ctypes.CDLL("libvulkan.so.1")
    except OSError as exc:
        return {"available": False, "reason": f"no Vulkan loader (Debian package libvulkan1): {exc}", "devices": []}
    app = ApplicationInfo(
        sType=STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName=b"rsi-probe", apiVersion=API_VERSION_1_2
    )
    info = InstanceCreateInfo(sType=STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=ctypes.pointer(app))
    instance = ctypes.c_void_p()
    result = vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance))
    if result != 0:
        return {"available": False, "reason": f"vkCreateInstance failed (VkResult {result})", "devices": []}
    try:
        count = ctypes.c_uint32()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        handles = (ctypes.c_void_p * count.value)()
        result = vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        if result not in (0, 5):  # VK_SUCCESS, VK_INCOMPLETE
            return {
                "available": False,
                "reason": f"vkEnumeratePhysicalDevices failed (VkResult {result})",
                "devices": [],
            }
        devices = [_device(vk, ctypes.c_void_p(h)) for h in handles[: count.value]]
    finally:
        vk.vkDestroyInstance(instance, None)
    return {
        "available": bool(devices),
        "reason": "" if devices else "the loader offers no Vulkan device",
        "devices": devices,
    }


if __name__ == "__main__":
    json.dump(probe(), sys.stdout)
